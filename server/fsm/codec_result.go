package fsm

import "github.com/lockservice/lockd/api"

// Version-1 tags of a Result (codec.go), in the struct's order. The
// format: never renumber, reuse or change the kind of one.
const (
	resErr     byte = 1  // message (error tags), written when non-nil
	resIndex   byte = 2  // uvarint
	resNode    byte = 3  // message (node tags), written when non-nil
	resToken   byte = 4  // uvarint
	resWaitFor byte = 5  // string
	resSession byte = 6  // uvarint
	resSecret  byte = 7  // string
	resLeaseMS byte = 8  // varint
	resEpoch   byte = 9  // uvarint
	resCount   byte = 10 // varint
	resDigest  byte = 11 // string
)

// Version-1 tags of an api.Error message.
const (
	apiErrCode    byte = 1 // string
	apiErrMessage byte = 2 // string
	apiErrLeader  byte = 3 // string
	apiErrCell    byte = 4 // string
)

// Version-1 tags of an api.Node message.
const (
	nodePath        byte = 1  // string
	nodeValue       byte = 2  // bytes
	nodeVersion     byte = 3  // uvarint
	nodeCreateIndex byte = 4  // uvarint
	nodeModifyIndex byte = 5  // uvarint
	nodeChildIndex  byte = 6  // uvarint
	nodeEphemeral   byte = 7  // flag
	nodeOwner       byte = 8  // uvarint
	nodeLockCode    byte = 9  // uvarint: a code of codecLocks
	nodeLockName    byte = 10 // string: a lock mode without a code
	nodeNumChildren byte = 11 // varint
	nodeContainer   byte = 13 // flag (codec V2)
)

// encodeResult writes r in version 1.
func encodeResult(r *Result) []byte {
	n := 48 + len(r.WaitFor) + len(r.Secret) + len(r.Digest)
	if r.Err != nil {
		n += 8 + len(r.Err.Code) + len(r.Err.Message) + len(r.Err.Leader) + len(r.Err.Cell)
	}
	if r.Node != nil {
		n += 48 + len(r.Node.Path) + len(r.Node.Value)
	}
	e := encoder{b: make([]byte, 0, n)}
	e.b = append(e.b, codecV1)
	if x := r.Err; x != nil {
		e.b = append(e.b, resErr)
		start := e.begin()
		e.str(apiErrCode, string(x.Code))
		e.str(apiErrMessage, x.Message)
		e.str(apiErrLeader, x.Leader)
		e.str(apiErrCell, x.Cell)
		e.end(start)
	}
	e.uvarint(resIndex, r.Index)
	if r.Node != nil {
		encodeNode(&e, r.Node)
	}
	e.uvarint(resToken, r.Token)
	e.str(resWaitFor, r.WaitFor)
	e.uvarint(resSession, r.Session)
	e.str(resSecret, r.Secret)
	e.varint(resLeaseMS, r.LeaseMS)
	e.uvarint(resEpoch, r.Epoch)
	e.varint(resCount, int64(r.Count))
	e.str(resDigest, r.Digest)
	encodeTxnResult(&e, r) // tags 14-16 (codec_txn.go)
	if e.over {
		return mustJSON(r) // past a decoder bound: JSON, which every version reads
	}
	return append(e.b, codecEnd)
}

// encodeNode writes the result's node as a tagged message.
func encodeNode(e *encoder, n *api.Node) {
	e.b = append(e.b, resNode)
	start := e.begin()
	e.str(nodePath, n.Path)
	e.bytes(nodeValue, n.Value)
	e.uvarint(nodeVersion, n.Version)
	e.uvarint(nodeCreateIndex, n.CreateIndex)
	e.uvarint(nodeModifyIndex, n.ModifyIndex)
	e.uvarint(nodeChildIndex, n.ChildIndex)
	e.flag(nodeEphemeral, n.Ephemeral)
	e.uvarint(nodeOwner, n.Owner)
	if code := codeOf(codecLocks[:], n.Lock); code != 0 {
		e.uvarint(nodeLockCode, code)
	} else {
		e.str(nodeLockName, string(n.Lock))
	}
	e.varint(nodeNumChildren, int64(n.NumChildren))
	e.flag(nodeContainer, n.Container)
	e.end(start)
}

// decodeResult decodes a result of any version.
func decodeResult(b []byte) (Result, error) {
	return decodeVersioned(b, decodeResultField)
}

// decodeResultField reads the field tagged t into r.
func decodeResultField(d *decoder, r *Result, t byte) {
	switch t {
	case resErr:
		r.Err = decodeError(d)
	case resIndex:
		r.Index = d.uvarint()
	case resNode:
		r.Node = decodeNode(d)
	case resToken:
		r.Token = d.uvarint()
	case resWaitFor:
		r.WaitFor = d.str()
	case resSession:
		r.Session = d.uvarint()
	case resSecret:
		r.Secret = d.str()
	case resLeaseMS:
		r.LeaseMS = d.varint()
	case resEpoch:
		r.Epoch = d.uvarint()
	case resCount:
		r.Count = d.int()
	case resDigest:
		r.Digest = d.str()
	case resTxnNodes, resFailedIf, resFailedThen:
		decodeTxnResultField(d, r, t)
	default:
		d.unknown("result", t)
	}
}

func decodeError(d *decoder) *api.Error {
	s := d.sub("err")
	x := &api.Error{}
	for t := s.next(); t != 0; t = s.next() {
		switch t {
		case apiErrCode:
			x.Code = api.Code(s.str())
		case apiErrMessage:
			x.Message = s.str()
		case apiErrLeader:
			x.Leader = s.str()
		case apiErrCell:
			x.Cell = s.str()
		default:
			s.unknown("err", t)
		}
	}
	d.done("err", &s)
	return x
}

func decodeNode(d *decoder) *api.Node {
	s := d.sub("node")
	n := &api.Node{}
	for t := s.next(); t != 0; t = s.next() {
		switch t {
		case nodePath:
			n.Path = s.str()
		case nodeValue:
			n.Value = s.bytes()
		case nodeVersion:
			n.Version = s.uvarint()
		case nodeCreateIndex:
			n.CreateIndex = s.uvarint()
		case nodeModifyIndex:
			n.ModifyIndex = s.uvarint()
		case nodeChildIndex:
			n.ChildIndex = s.uvarint()
		case nodeEphemeral:
			n.Ephemeral = true
		case nodeOwner:
			n.Owner = s.uvarint()
		case nodeLockCode:
			n.Lock = byCode(&s, "lock mode", codecLocks[:], s.uvarint())
		case nodeLockName:
			n.Lock = api.LockMode(s.str())
		case nodeNumChildren:
			n.NumChildren = s.int()
		case nodeContainer:
			n.Container = true
		default:
			s.unknown("node", t)
		}
	}
	d.done("node", &s)
	return n
}
