package cell

import (
	"context"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/fsm"
)

// The codec gate on this replica (server/fsm codecgate.go): a proposal is
// encoded in the codec this replica's applied state holds, which only a
// committed set_codec raises, and the leader proposes set_codec once the
// directory's floor (Placement.LogCodec) says every lockd decodes it. So
// no binary entry is ever proposed before every replica can read it.

// setCodecAttempts bounds one adopt pass's set_codec proposals.
const setCodecAttempts = 20

// noteCodec records the applied state's codec (under the machine's write
// lock, after an apply or a snapshot load): what encodeProposal reads.
func (c *Cell) noteCodec(s *fsm.State) {
	c.logCodec.Store(uint32(s.LogCodec()))
}

// LogCodec is the log codec this replica's applied state holds.
func (c *Cell) LogCodec() fsm.LogCodec { return fsm.LogCodec(c.logCodec.Load()) }

// UngatedEntries counts the entries this replica applied written in a
// codec above its state's: a proposer broke the gate (always 0 unless
// there is a bug; a replica of an older build would have refused them).
func (c *Cell) UngatedEntries() uint64 { return c.ungated.Load() }

// proposalCodec is the codec a proposal is encoded in: the applied
// state's, or JSON on a lockd simulating a build from before the binary
// codec (Config.JSONLog).
func proposalCodec(state fsm.LogCodec, jsonOnly bool) fsm.LogCodec {
	if mutant.On(mutant.CodecUngated) {
		return fsm.LogCodecNewest
	}
	if jsonOnly {
		return fsm.LogCodecJSON
	}
	return state
}

// encodeProposal encodes cmd for the log, gated by the state's codec.
func (c *Cell) encodeProposal(cmd *fsm.Command) []byte {
	return cmd.EncodeFor(proposalCodec(c.LogCodec(), c.cfg.JSONLog))
}

// checkEntryCodec counts an entry written above the state's codec; it
// runs before the entry applies (which may be the set_codec itself, in
// JSON).
func (c *Cell) checkEntryCodec(s *fsm.State, index uint64, data []byte) {
	if got, state := fsm.EntryCodec(data), s.LogCodec(); got > state {
		c.ungated.Add(1)
		c.log.Error("log entry written in a codec above the cell's: a replica of an older build cannot read it", "index", index, "codec", got, "cell_codec", state)
	}
}

// codecToPropose is the set_codec the leader should commit: the
// directory's floor, if above the state's codec and known to this build
// (a lockd simulating an old build proposes none).
func codecToPropose(floor, state fsm.LogCodec, jsonOnly bool) (fsm.LogCodec, bool) {
	if jsonOnly || floor <= state || floor > fsm.LogCodecNewest {
		return state, false
	}
	return floor, true
}

// adoptCodec commits set_codec on the leader when the directory's floor
// is above the cell's codec; false if this replica stopped leading.
func (c *Cell) adoptCodec(floor fsm.LogCodec) bool {
	for attempt := 0; attempt < setCodecAttempts; attempt++ {
		if active, _ := c.sessions.Active(); !active {
			return false
		}
		to, due := codecToPropose(floor, c.LogCodec(), c.cfg.JSONLog)
		if !due {
			return true
		}
		cmd := fsm.SetCodecCmd(to)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := c.propose(ctx, &cmd)
		cancel()
		if err == nil {
			c.log.Info("log codec raised", "codec", to)
			return true
		}
		c.log.Warn("set_codec not committed", "codec", to, "attempt", attempt, "err", err)
		if IsRefusal(err) {
			return true // final: the next placement tries again
		}
		select {
		case <-c.stop:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}
