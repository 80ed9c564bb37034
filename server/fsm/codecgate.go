package fsm

// The codec gate: which log codec a cell's entries may be written in.
//
// A replica of a build from before the binary codec reads a binary entry
// as undecodable and applies nothing where the others apply it: the
// replicas diverge. So a cell writes binary only once its state says so:
// the state holds the cell's log codec (0, JSON, until raised), a
// set_codec entry raises it (never lowers it), and the proposer encodes
// every command in the codec its applied state holds (EncodeFor). The
// cell's leader proposes set_codec only once the directory's floor says
// every lockd decodes the new codec (server/dirfsm, codecfloor.go). An
// entry in a codec above the state's still applies (this build decodes
// both): the protection is on the proposer's side, and EntryCodec lets
// the runtime count such entries (a bug if ever non-zero).

import (
	"encoding/json"
	"fmt"

	"github.com/lockservice/lockd/api"
)

// LogCodec names a version of the log codec (codec.go).
type LogCodec uint8

const (
	// LogCodecJSON is version 0: JSON, what every build decodes.
	LogCodecJSON LogCodec = 0
	// LogCodecV1 is version 1: the binary codec.
	LogCodecV1 LogCodec = 1
	// LogCodecV2 is the binary codec (encoded as version 1) with the
	// vocabulary issue 26 added: semaphores, transactions, lock
	// downgrade and upgrade, self-cleaning directories. A replica of a
	// build that knows only version 1 cannot apply those entries, so a
	// cell proposes them only once its state is at V2 (NeedCodec).
	LogCodecV2 LogCodec = 2
	// LogCodecV3 is the binary codec (encoded as version 1) with the
	// vocabulary issue 27 (the etcd gateway) added: a transaction's
	// compares (create_rev, mod_rev, version_cmp, value, owner), and a
	// put's or txn write's Container and Uncontain. A replica of a V2
	// build refuses those entries as undecodable (unknown codes and
	// tags), or, for Container on a put (a tag it knows), applies the
	// put without it: a cell proposes them only at V3 (TxnCodec,
	// PutCodec).
	LogCodecV3 LogCodec = 3
	// LogCodecV4 is the binary codec (encoded as version 1) with a
	// planned hand-over's vocabulary (handover.go): hand_over, and
	// leader_start's HandOverIndex and HandOverMS. A replica of a V3
	// build refuses them as undecodable: a cell's leader hands over with
	// them only at V4 (and gives every session a full lease before).
	LogCodecV4 LogCodec = 4
	// LogCodecNewest is the highest codec this build encodes and decodes.
	LogCodecNewest = LogCodecV4
)

// NeedCodec refuses a request whose entry needs codec need on a cell
// whose state is at have: some lockd of the cluster may be of an older
// build that could not apply it (codec_too_old, retryable once every
// lockd is upgraded and the directory's floor rose).
func NeedCodec(have, need LogCodec, what string) *api.Error {
	if have >= need {
		return nil
	}
	return api.Errorf(api.CodeCodecTooOld, "%s needs log codec %d and this cell writes %d: every lockd of the cluster must run a build that decodes it (upgrade them; the directory raises the floor by itself)", what, need, have)
}

// TxnCodec is the lowest log codec whose replicas all apply req as this
// build does, and what needs it (for NeedCodec's message): V2 for a
// transaction, V3 with a compare or a write's container or uncontain.
func TxnCodec(req *api.TxnRequest) (LogCodec, string) {
	for _, k := range req.If { // at most api.MaxTxnConds (checked by the caller's shape check or the fsm)
		if k.If.IsCompare() {
			return LogCodecV3, "a transaction with a compare (" + string(k.If) + ")"
		}
	}
	for _, o := range req.Then {
		if o.Container || o.Uncontain {
			return LogCodecV3, "a transaction write with container or uncontain"
		}
	}
	return LogCodecV2, "a transaction"
}

// PutCodec is the lowest log codec whose replicas all apply req as this
// build does: V3 for a put with Container or Uncontain, else any.
func PutCodec(req *api.PutRequest) (LogCodec, string) {
	if req.Container || req.Uncontain {
		return LogCodecV3, "a put with container or uncontain"
	}
	return LogCodecJSON, "a put"
}

// OpSetCodec raises the cell's log codec to Epoch (the field carries the
// codec). Always written in JSON, which every replica decodes, whatever
// the codec. A codec at or below the state's changes nothing; one above
// LogCodecNewest is refused.
const OpSetCodec Op = "set_codec"

// LogCodec is the codec the cell's entries are written in from now on.
func (s *State) LogCodec() LogCodec { return s.codec }

// SetCodecCmd is the set_codec entry raising the cell to codec.
func SetCodecCmd(codec LogCodec) Command {
	return Command{Op: OpSetCodec, Epoch: uint64(codec)}
}

// EncodeFor serialises a command for a log written in codec: JSON for
// LogCodecJSON (and always for set_codec), else the binary version 1.
func (c *Command) EncodeFor(codec LogCodec) []byte {
	if codec == LogCodecJSON || c.Op == OpSetCodec {
		return mustJSON(c)
	}
	return encodeCommand(c)
}

// EncodeFor serialises a result in codec, as a state at that codec keeps
// it for dedupe.
func (r *Result) EncodeFor(codec LogCodec) []byte {
	if codec == LogCodecJSON {
		return mustJSON(r)
	}
	return encodeResult(r)
}

// mustJSON is version 0 of a command or result (plain types: it cannot
// fail).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fsm: JSON encoding: %v", err))
	}
	return b
}

// EntryCodec is the codec an encoded entry is written in (by its first
// byte); an empty or unknown one counts as JSON (it is refused as
// undecodable whatever the codec).
func EntryCodec(data []byte) LogCodec {
	if len(data) > 0 && data[0] == codecV1 {
		return LogCodecV1
	}
	return LogCodecJSON
}

// setCodec applies set_codec: the codec only rises, and every stored
// dedupe answer is re-encoded in it, so that a replica that applied the
// switch holds the same bytes as one restored from a snapshot after it.
func (s *State) setCodec(c *Command) Result {
	if c.Epoch > uint64(LogCodecNewest) {
		return Result{Err: api.Errorf(api.CodeBadRequest, "log codec %d is unknown to this build (newest %d)", c.Epoch, LogCodecNewest)}
	}
	to := LogCodec(c.Epoch)
	if to <= s.codec {
		return Result{}
	}
	s.codec = to
	for _, sess := range s.sessions {
		for i := range sess.results {
			sess.results[i].result = recodeResult(to, sess.results[i].result)
		}
	}
	return Result{}
}

// recodeResult is a stored result in codec (an undecodable one is kept
// as it is).
func recodeResult(codec LogCodec, b []byte) []byte {
	if EntryCodec(b) == min(codec, LogCodecV1) { // V2 is written as version 1
		return b
	}
	r, err := decodeResult(b)
	if err != nil {
		return b
	}
	return r.EncodeFor(codec)
}
