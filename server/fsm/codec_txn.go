package fsm

// The binary codec of a txn entry's fields and its result's (codec.go):
// Command tags 45-54 and Result tags 14-17 are the transactions'. Every
// field here is log codec V2 vocabulary (a cell proposes a txn only at V2),
// except the compares (condition tags 6-10, kind codes 5-9) and a write's
// container and uncontain (write tags 11-12), which are V3 (TxnCodec).

import (
	"encoding/binary"

	"github.com/lockservice/lockd/api"
)

// Version-1 tags of a txn Command's fields.
const (
	cmdTxnIf   byte = 45 // list of messages (txn condition tags)
	cmdTxnThen byte = 46 // list of messages (txn write tags)
)

// Version-1 tags of a txn Result's fields.
const (
	resTxnNodes   byte = 14 // list of messages (node tags)
	resFailedIf   byte = 15 // varint
	resFailedThen byte = 16 // varint
)

// Version-1 tags of a txn condition message (api.TxnCond).
const (
	condKindCode byte = 1  // uvarint: a code of codecConds
	condKindName byte = 2  // string: a kind without a code
	condPath     byte = 3  // string
	condToken    byte = 4  // uvarint
	condVersion  byte = 5  // uvarint
	condCmpCode  byte = 6  // uvarint: a code of codecCmps (codec V3)
	condCmpName  byte = 7  // string: an operator without a code (codec V3)
	condRev      byte = 8  // uvarint (codec V3)
	condValue    byte = 9  // bytes (codec V3)
	condOwner    byte = 10 // uvarint (codec V3)
)

// Version-1 tags of a txn write message (TxnOp).
const (
	txnOpCode        byte = 1  // uvarint: a code of codecTxnOps
	txnOpName        byte = 2  // string: a kind without a code
	txnOpPath        byte = 3  // string
	txnOpValue       byte = 4  // bytes
	txnOpVersion     byte = 5  // uvarint, written when Version is non-nil (0 too)
	txnOpEphemeral   byte = 6  // flag
	txnOpSequential  byte = 7  // flag
	txnOpMakeParents byte = 8  // flag
	txnOpOwnOnly     byte = 9  // flag
	txnOpParentsFrom byte = 10 // string
	txnOpContainer   byte = 11 // flag (codec V3)
	txnOpUncontain   byte = 12 // flag (codec V3)
)

// codecConds, codecCmps and codecTxnOps are the kinds' and operators'
// version-1 codes (the index); 0 is none. Append only.
var (
	codecConds = [...]api.TxnCondKind{1: api.CondHolds, 2: api.CondVersion, 3: api.CondMissing, 4: api.CondExists,
		5: api.CondCreateRev, 6: api.CondModRev, 7: api.CondVersionCmp, 8: api.CondValue, 9: api.CondOwner}
	codecCmps   = [...]api.TxnCmp{1: api.CmpEqual, 2: api.CmpNotEqual, 3: api.CmpLess, 4: api.CmpGreater}
	codecTxnOps = [...]api.TxnOpKind{1: api.TxnPut, 2: api.TxnCreate, 3: api.TxnDelete}
)

// maxCodecTxn bounds a txn entry's conditions and writes as a decoder
// reads them (the state refuses past api.MaxTxnOps, api.MaxTxnConds;
// the decoder only keeps a hostile count from allocating).
const maxCodecTxn = 4 * max(api.MaxTxnOps, api.MaxTxnConds)

// encodeTxnCommand writes c's txn fields (tags 45-46).
func encodeTxnCommand(e *encoder, c *Command) {
	if len(c.If) != 0 {
		e.b = binary.AppendUvarint(append(e.b, cmdTxnIf), uint64(len(c.If)))
		for i := range c.If {
			encodeTxnCond(e, &c.If[i])
		}
	}
	if len(c.Then) != 0 {
		e.b = binary.AppendUvarint(append(e.b, cmdTxnThen), uint64(len(c.Then)))
		for i := range c.Then {
			encodeTxnOp(e, &c.Then[i])
		}
	}
	e.over = e.over || len(c.If) > maxCodecTxn || len(c.Then) > maxCodecTxn
}

func encodeTxnCond(e *encoder, k *api.TxnCond) {
	start := e.begin()
	if code := codeOf(codecConds[:], k.If); code != 0 {
		e.uvarint(condKindCode, code)
	} else {
		e.str(condKindName, string(k.If))
	}
	e.str(condPath, k.Path)
	e.uvarint(condToken, k.Token)
	e.uvarint(condVersion, k.Version)
	if code := codeOf(codecCmps[:], k.Cmp); code != 0 {
		e.uvarint(condCmpCode, code)
	} else {
		e.str(condCmpName, string(k.Cmp))
	}
	e.uvarint(condRev, k.Rev)
	e.bytes(condValue, k.Value)
	e.uvarint(condOwner, k.Owner)
	e.end(start)
}

func encodeTxnOp(e *encoder, o *TxnOp) {
	start := e.begin()
	if code := codeOf(codecTxnOps[:], o.Op); code != 0 {
		e.uvarint(txnOpCode, code)
	} else {
		e.str(txnOpName, string(o.Op))
	}
	e.str(txnOpPath, o.Path)
	e.bytes(txnOpValue, o.Value)
	if o.Version != nil {
		e.b = binary.AppendUvarint(append(e.b, txnOpVersion), *o.Version)
	}
	e.flag(txnOpEphemeral, o.Ephemeral)
	e.flag(txnOpSequential, o.Sequential)
	e.flag(txnOpMakeParents, o.MakeParents)
	e.flag(txnOpOwnOnly, o.OwnOnly)
	e.str(txnOpParentsFrom, o.ParentsFrom)
	e.flag(txnOpContainer, o.Container)
	e.flag(txnOpUncontain, o.Uncontain)
	e.end(start)
}

// decodeTxnCommandField reads a txn field of a command; false if t is
// not one.
func decodeTxnCommandField(d *decoder, c *Command, t byte) bool {
	switch t {
	case cmdTxnIf:
		n := d.count("txn conditions", maxCodecTxn)
		c.If = make([]api.TxnCond, n)
		for i := range c.If {
			decodeTxnCond(d, &c.If[i])
		}
		if n == 0 {
			c.If = nil
		}
	case cmdTxnThen:
		n := d.count("txn writes", maxCodecTxn)
		c.Then = make([]TxnOp, n)
		for i := range c.Then {
			decodeTxnOp(d, &c.Then[i])
		}
		if n == 0 {
			c.Then = nil
		}
	default:
		return false
	}
	return true
}

func decodeTxnCond(d *decoder, k *api.TxnCond) {
	s := d.sub("txn condition")
	for t := s.next(); t != 0; t = s.next() {
		switch t {
		case condKindCode:
			k.If = byCode(&s, "txn condition", codecConds[:], s.uvarint())
		case condKindName:
			k.If = api.TxnCondKind(s.str())
		case condPath:
			k.Path = s.str()
		case condToken:
			k.Token = s.uvarint()
		case condVersion:
			k.Version = s.uvarint()
		case condCmpCode:
			k.Cmp = byCode(&s, "txn condition", codecCmps[:], s.uvarint())
		case condCmpName:
			k.Cmp = api.TxnCmp(s.str())
		case condRev:
			k.Rev = s.uvarint()
		case condValue:
			k.Value = s.bytes()
		case condOwner:
			k.Owner = s.uvarint()
		default:
			s.unknown("txn condition", t)
		}
	}
	d.done("txn condition", &s)
}

func decodeTxnOp(d *decoder, o *TxnOp) {
	s := d.sub("txn write")
	for t := s.next(); t != 0; t = s.next() {
		switch t {
		case txnOpCode:
			o.Op = byCode(&s, "txn write", codecTxnOps[:], s.uvarint())
		case txnOpName:
			o.Op = api.TxnOpKind(s.str())
		case txnOpPath:
			o.Path = s.str()
		case txnOpValue:
			o.Value = s.bytes()
		case txnOpVersion:
			v := s.uvarint()
			o.Version = &v
		case txnOpEphemeral:
			o.Ephemeral = true
		case txnOpSequential:
			o.Sequential = true
		case txnOpMakeParents:
			o.MakeParents = true
		case txnOpOwnOnly:
			o.OwnOnly = true
		case txnOpParentsFrom:
			o.ParentsFrom = s.str()
		case txnOpContainer:
			o.Container = true
		case txnOpUncontain:
			o.Uncontain = true
		default:
			s.unknown("txn write", t)
		}
	}
	d.done("txn write", &s)
}

// encodeTxnResult writes r's txn fields (tags 14-16). Each node is the
// node message encodeNode writes, without its resNode tag.
func encodeTxnResult(e *encoder, r *Result) {
	if len(r.TxnNodes) != 0 {
		e.b = binary.AppendUvarint(append(e.b, resTxnNodes), uint64(len(r.TxnNodes)))
		for i := range r.TxnNodes {
			at := len(e.b)
			encodeNode(e, &r.TxnNodes[i])
			e.b = append(e.b[:at], e.b[at+1:]...) // drop the resNode tag
		}
		e.over = e.over || len(r.TxnNodes) > maxCodecTxn
	}
	e.varint(resFailedIf, int64(r.FailedIf))
	e.varint(resFailedThen, int64(r.FailedThen))
}

// decodeTxnResultField reads a txn field of a result; false if t is not
// one.
func decodeTxnResultField(d *decoder, r *Result, t byte) bool {
	switch t {
	case resTxnNodes:
		n := d.count("txn nodes", maxCodecTxn)
		if n > 0 {
			r.TxnNodes = make([]api.Node, n)
		}
		for i := 0; i < n; i++ {
			r.TxnNodes[i] = *decodeNode(d)
		}
	case resFailedIf:
		r.FailedIf = d.int()
	case resFailedThen:
		r.FailedThen = d.int()
	default:
		return false
	}
	return true
}
