package fsm

import (
	"encoding/binary"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// Version-1 tags of a Command (codec.go), in the struct's order. The
// format: never renumber, reuse or change the kind of one.
const (
	cmdOpCode           byte = 1  // uvarint: a code of codecOps
	cmdOpName           byte = 2  // string: an op without a code
	cmdSession          byte = 3  // uvarint (WriteHeader)
	cmdSecret           byte = 4  // string (WriteHeader)
	cmdRequest          byte = 5  // uvarint (WriteHeader)
	cmdAck              byte = 6  // uvarint (WriteHeader)
	cmdPath             byte = 7  // string
	cmdValue            byte = 8  // bytes
	cmdVersion          byte = 9  // uvarint, written when Version is non-nil (0 too)
	cmdEphemeral        byte = 10 // flag
	cmdSequential       byte = 11 // flag
	cmdLockCode         byte = 12 // uvarint: a code of codecLocks
	cmdLockName         byte = 13 // string: a lock mode without a code
	cmdMakeParents      byte = 14 // flag
	cmdParentsFrom      byte = 15 // string
	cmdLockDelayMS      byte = 16 // varint
	cmdAtMS             byte = 17 // varint
	cmdSince            byte = 18 // uvarint
	cmdLeaseMS          byte = 19 // varint
	cmdTenant           byte = 20 // string
	cmdQuota            byte = 21 // message (quota tags), written when non-nil
	cmdAdmin            byte = 22 // flag
	cmdOwnOnly          byte = 23 // flag
	cmdNonce            byte = 24 // string
	cmdEpoch            byte = 25 // uvarint
	cmdTarget           byte = 26 // uvarint
	cmdElapsedMS        byte = 27 // varint
	cmdSessions         byte = 28 // list of uvarints
	cmdCell             byte = 29 // string
	cmdDirIndex         byte = 30 // uvarint
	cmdStaged           byte = 31 // flag
	cmdFirst            byte = 32 // flag
	cmdLast             byte = 33 // flag
	cmdNodes            byte = 34 // list of messages (exported-node tags)
	cmdPage             byte = 35 // uvarint
	cmdReplicaID        byte = 36 // uvarint
	cmdTerm             byte = 37 // uvarint
	cmdPrevLeadershipMS byte = 38 // varint
	cmdRestored         byte = 39 // message (restore tags), written when non-nil
	cmdPermits          byte = 40 // varint (semaphores, codec V2)
	cmdContainer        byte = 55 // flag (container directories, codec V2; on a put V3)
	cmdUncontain        byte = 56 // flag (a put making a container plain, codec V3)
	cmdSilentMS         byte = 57 // list of varints (hand_over, codec V4)
	cmdHandOverIndex    byte = 58 // uvarint (leader_start, codec V4)
	cmdHandOverMS       byte = 59 // varint (leader_start, codec V4)
)

// Version-1 tags of an api.Quota message.
const (
	quotaSessions     byte = 1 // varint
	quotaNodes        byte = 2 // varint
	quotaBytes        byte = 3 // varint
	quotaWatches      byte = 4 // varint
	quotaWritesPerSec byte = 5 // varint
)

// Version-1 tags of an api.ExportedNode message.
const (
	expPath      byte = 1 // string
	expValue     byte = 2 // bytes
	expVersion   byte = 3 // uvarint
	expNextSeq   byte = 4 // uvarint
	expTenant    byte = 5 // string
	expDelayMS   byte = 6 // varint
	expKept      byte = 7 // flag
	expContainer byte = 9 // flag (codec V2)
)

// Version-1 tags of a RestoreStart message.
const (
	restoreFloor    byte = 1 // uvarint
	restorePrefixes byte = 2 // list of strings
)

// codecOps are the ops' version-1 codes (the index); 0 is none. Append
// only.
var codecOps = [...]Op{
	1: OpOpenSession, 2: OpCloseSession, 3: OpExpireSession, 4: OpCreate,
	5: OpPut, 6: OpDelete, 7: OpLeaderStart, 8: OpLeaderTick, 9: OpConfirm,
	10: OpCacheSession, 11: OpEnsurePrefix, 12: OpSealPrefix,
	13: OpUnsealPrefix, 14: OpStagePrefix, 15: OpDropPrefix,
	16: OpEndLockDelay,
	19: OpTxn,         // codec V2 (txn.go)
	21: OpSetLockMode, // codec V2 (rwlock.go)
	22: OpHandOver,    // codec V4 (handover.go)
}

// codecLocks are the lock modes' version-1 codes (the index); 0 is none.
// Append only.
var codecLocks = [...]api.LockMode{1: api.LockExclusive, 2: api.LockShared, 3: api.LockPermit, 4: api.LockUpgradable}

// codeOf returns v's index in table, or 0 (v is "" or has no code).
func codeOf[T comparable](table []T, v T) uint64 {
	var zero T
	if v == zero {
		return 0
	}
	for i := 1; i < len(table); i++ {
		if table[i] == v {
			return uint64(i)
		}
	}
	return 0
}

// byCode returns table[code], failing d on a code outside it.
func byCode[T any](d *decoder, what string, table []T, code uint64) T {
	var zero T
	if code == 0 || code >= uint64(len(table)) {
		d.fail("unknown %s code %d", what, code)
		return zero
	}
	return table[code]
}

// encodeCommand writes c in version 1.
func encodeCommand(c *Command) []byte {
	e := encoder{b: make([]byte, 0, commandSizeHint(c))}
	e.b = append(e.b, codecV1)
	if code := codeOf(codecOps[:], c.Op); code != 0 {
		e.uvarint(cmdOpCode, code)
	} else {
		e.str(cmdOpName, string(c.Op))
	}
	e.uvarint(cmdSession, c.Session)
	e.str(cmdSecret, c.Secret)
	e.uvarint(cmdRequest, c.Request)
	e.uvarint(cmdAck, c.Ack)
	e.str(cmdPath, c.Path)
	e.bytes(cmdValue, c.Value)
	if c.Version != nil {
		e.b = append(e.b, cmdVersion)
		e.b = binary.AppendUvarint(e.b, *c.Version)
	}
	e.flag(cmdEphemeral, c.Ephemeral)
	e.flag(cmdSequential, c.Sequential)
	if code := codeOf(codecLocks[:], c.Lock); code != 0 {
		e.uvarint(cmdLockCode, code)
	} else {
		e.str(cmdLockName, string(c.Lock))
	}
	e.flag(cmdMakeParents, c.MakeParents)
	e.str(cmdParentsFrom, c.ParentsFrom)
	if !mutant.On(mutant.CodecDropsField) {
		e.varint(cmdLockDelayMS, c.LockDelayMS)
	}
	e.varint(cmdAtMS, c.AtMS)
	e.uvarint(cmdSince, c.Since)
	encodeCommandRest(&e, c)
	if e.over || len(c.Nodes) > maxCodecNodes || len(c.Sessions) > maxCodecSessions || len(c.SilentMS) > maxCodecSessions {
		return mustJSON(c) // past a decoder bound: JSON, which every version reads
	}
	return append(e.b, codecEnd)
}

// encodeCommandRest writes c's fields from LeaseMS on.
func encodeCommandRest(e *encoder, c *Command) {
	e.varint(cmdLeaseMS, c.LeaseMS)
	e.str(cmdTenant, c.Tenant)
	if q := c.Quota; q != nil {
		e.b = append(e.b, cmdQuota)
		start := e.begin()
		e.varint(quotaSessions, int64(q.Sessions))
		e.varint(quotaNodes, int64(q.Nodes))
		e.varint(quotaBytes, q.Bytes)
		e.varint(quotaWatches, int64(q.Watches))
		e.varint(quotaWritesPerSec, int64(q.WritesPerSec))
		e.end(start)
	}
	e.flag(cmdAdmin, c.Admin)
	e.flag(cmdOwnOnly, c.OwnOnly)
	e.str(cmdNonce, c.Nonce)
	e.uvarint(cmdEpoch, c.Epoch)
	e.uvarint(cmdTarget, c.Target)
	e.varint(cmdElapsedMS, c.ElapsedMS)
	if len(c.Sessions) != 0 {
		e.b = binary.AppendUvarint(append(e.b, cmdSessions), uint64(len(c.Sessions)))
		for _, id := range c.Sessions {
			e.b = binary.AppendUvarint(e.b, id)
		}
	}
	e.str(cmdCell, c.Cell)
	e.uvarint(cmdDirIndex, c.DirIndex)
	e.flag(cmdStaged, c.Staged)
	e.flag(cmdFirst, c.First)
	e.flag(cmdLast, c.Last)
	if len(c.Nodes) != 0 {
		e.b = binary.AppendUvarint(append(e.b, cmdNodes), uint64(len(c.Nodes)))
		for i := range c.Nodes {
			encodeExported(e, &c.Nodes[i])
		}
	}
	e.uvarint(cmdPage, c.Page)
	e.uvarint(cmdReplicaID, c.ReplicaID)
	e.uvarint(cmdTerm, c.Term)
	e.varint(cmdPrevLeadershipMS, c.PrevLeadershipMS)
	if r := c.Restored; r != nil {
		e.b = append(e.b, cmdRestored)
		start := e.begin()
		e.uvarint(restoreFloor, r.Floor)
		if len(r.Prefixes) != 0 {
			e.b = binary.AppendUvarint(append(e.b, restorePrefixes), uint64(len(r.Prefixes)))
			for _, p := range r.Prefixes {
				e.b = append(binary.AppendUvarint(e.b, uint64(len(p))), p...)
			}
		}
		e.end(start)
	}
	e.varint(cmdPermits, c.Permits) // tags from 40 on follow here, ascending
	encodeTxnCommand(e, c)          // tags 45-54 (codec_txn.go)
	e.flag(cmdContainer, c.Container)
	e.flag(cmdUncontain, c.Uncontain)
	if len(c.SilentMS) != 0 {
		e.b = binary.AppendUvarint(append(e.b, cmdSilentMS), uint64(len(c.SilentMS)))
		for _, ms := range c.SilentMS {
			e.b = binary.AppendVarint(e.b, ms)
		}
	}
	e.uvarint(cmdHandOverIndex, c.HandOverIndex)
	e.varint(cmdHandOverMS, c.HandOverMS)
}

// encodeExported writes one exported node as a length-prefixed message.
func encodeExported(e *encoder, n *api.ExportedNode) {
	start := e.begin()
	e.str(expPath, n.Path)
	e.bytes(expValue, n.Value)
	e.uvarint(expVersion, n.Version)
	e.uvarint(expNextSeq, n.NextSeq)
	e.str(expTenant, n.Tenant)
	e.varint(expDelayMS, n.DelayMS)
	e.flag(expKept, n.Kept)
	e.flag(expContainer, n.Container)
	e.end(start)
}

// commandSizeHint is about c's encoded size, so that encoding allocates once.
func commandSizeHint(c *Command) int {
	n := 96 + len(c.Op) + len(c.Secret) + len(c.Path) + len(c.Value) + len(c.ParentsFrom) +
		len(c.Tenant) + len(c.Nonce) + len(c.Cell) + 10*len(c.Sessions) + 10*len(c.SilentMS)
	for i := range c.Nodes {
		n += 40 + len(c.Nodes[i].Path) + len(c.Nodes[i].Value) + len(c.Nodes[i].Tenant)
	}
	if c.Restored != nil {
		for _, p := range c.Restored.Prefixes {
			n += 3 + len(p)
		}
	}
	return n
}

// decodeCommand decodes a command of any version.
func decodeCommand(b []byte) (Command, error) {
	return decodeVersioned(b, decodeCommandField)
}

// decodeCommandField reads the field tagged t into c.
func decodeCommandField(d *decoder, c *Command, t byte) {
	switch t {
	case cmdOpCode:
		c.Op = byCode(d, "op", codecOps[:], d.uvarint())
	case cmdOpName:
		c.Op = Op(d.str())
	case cmdSession:
		c.Session = d.uvarint()
	case cmdSecret:
		c.Secret = d.str()
	case cmdRequest:
		c.Request = d.uvarint()
	case cmdAck:
		c.Ack = d.uvarint()
	case cmdPath:
		c.Path = d.str()
	case cmdValue:
		c.Value = d.bytes()
	case cmdVersion:
		v := d.uvarint()
		c.Version = &v
	case cmdEphemeral:
		c.Ephemeral = true
	case cmdSequential:
		c.Sequential = true
	case cmdLockCode:
		c.Lock = byCode(d, "lock mode", codecLocks[:], d.uvarint())
	case cmdLockName:
		c.Lock = api.LockMode(d.str())
	case cmdMakeParents:
		c.MakeParents = true
	case cmdParentsFrom:
		c.ParentsFrom = d.str()
	case cmdLockDelayMS:
		c.LockDelayMS = d.varint()
	case cmdAtMS:
		c.AtMS = d.varint()
	case cmdSince:
		c.Since = d.uvarint()
	case cmdLeaseMS:
		c.LeaseMS = d.varint()
	case cmdTenant:
		c.Tenant = d.str()
	case cmdQuota:
		c.Quota = decodeQuota(d)
	case cmdAdmin:
		c.Admin = true
	case cmdOwnOnly:
		c.OwnOnly = true
	case cmdNonce:
		c.Nonce = d.str()
	case cmdEpoch:
		c.Epoch = d.uvarint()
	case cmdTarget:
		c.Target = d.uvarint()
	case cmdElapsedMS:
		c.ElapsedMS = d.varint()
	case cmdSessions:
		c.Sessions = decodeSessions(d)
	case cmdCell:
		c.Cell = d.str()
	case cmdDirIndex:
		c.DirIndex = d.uvarint()
	case cmdStaged:
		c.Staged = true
	case cmdFirst:
		c.First = true
	case cmdLast:
		c.Last = true
	case cmdNodes:
		c.Nodes = decodeExportedNodes(d)
	case cmdPage:
		c.Page = d.uvarint()
	case cmdReplicaID:
		c.ReplicaID = d.uvarint()
	case cmdTerm:
		c.Term = d.uvarint()
	case cmdPrevLeadershipMS:
		c.PrevLeadershipMS = d.varint()
	case cmdRestored:
		c.Restored = decodeRestoreStart(d)
	case cmdPermits:
		c.Permits = d.varint()
	case cmdTxnIf, cmdTxnThen:
		decodeTxnCommandField(d, c, t)
	case cmdContainer:
		c.Container = true
	case cmdSilentMS:
		c.SilentMS = decodeSilences(d)
	case cmdHandOverIndex:
		c.HandOverIndex = d.uvarint()
	case cmdHandOverMS:
		c.HandOverMS = d.varint()
	case cmdUncontain:
		c.Uncontain = true
	default:
		d.unknown("command", t)
	}
}

func decodeQuota(d *decoder) *api.Quota {
	s := d.sub("quota")
	q := &api.Quota{}
	for t := s.next(); t != 0; t = s.next() {
		switch t {
		case quotaSessions:
			q.Sessions = s.int()
		case quotaNodes:
			q.Nodes = s.int()
		case quotaBytes:
			q.Bytes = s.varint()
		case quotaWatches:
			q.Watches = s.int()
		case quotaWritesPerSec:
			q.WritesPerSec = s.int()
		default:
			s.unknown("quota", t)
		}
	}
	d.done("quota", &s)
	return q
}

func decodeSessions(d *decoder) []uint64 { return decodeList(d, "sessions", d.uvarint) }

func decodeSilences(d *decoder) []int64 { return decodeList(d, "silences", d.varint) }

// decodeList reads a count, at most maxCodecSessions, then that many
// values.
func decodeList[T any](d *decoder, what string, read func() T) []T {
	n := d.count(what, maxCodecSessions)
	if n == 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = read()
	}
	return out
}

func decodeExportedNodes(d *decoder) []api.ExportedNode {
	n := d.count("nodes", maxCodecNodes)
	if n == 0 {
		return nil
	}
	nodes := make([]api.ExportedNode, n)
	for i := range nodes {
		decodeExported(d, &nodes[i])
	}
	return nodes
}

func decodeExported(d *decoder, n *api.ExportedNode) {
	s := d.sub("node")
	for t := s.next(); t != 0; t = s.next() {
		switch t {
		case expPath:
			n.Path = s.str()
		case expValue:
			n.Value = s.bytes()
		case expVersion:
			n.Version = s.uvarint()
		case expNextSeq:
			n.NextSeq = s.uvarint()
		case expTenant:
			n.Tenant = s.str()
		case expDelayMS:
			n.DelayMS = s.varint()
		case expKept:
			n.Kept = true
		case expContainer:
			n.Container = true
		default:
			s.unknown("node", t)
		}
	}
	d.done("node", &s)
}

func decodeRestoreStart(d *decoder) *RestoreStart {
	s := d.sub("restored")
	r := &RestoreStart{}
	for t := s.next(); t != 0; t = s.next() {
		switch t {
		case restoreFloor:
			r.Floor = s.uvarint()
		case restorePrefixes:
			n := s.count("prefixes", maxCodecPrefixes)
			if n > 0 {
				r.Prefixes = make([]string, n)
			}
			for i := 0; i < n; i++ {
				r.Prefixes[i] = s.str()
			}
		default:
			s.unknown("restored", t)
		}
	}
	d.done("restored", &s)
	return r
}
