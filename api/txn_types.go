package api

// Transactions: a few writes on one cell committed together, in one log
// entry, only if every condition holds (docs/api.md, "Transactions").

// RouteTxn commits a transaction (TxnRequest → TxnResponse).
const RouteTxn = "/v1/txn"

// Bounds of one transaction.
const (
	// MaxTxnOps bounds the writes of one transaction.
	MaxTxnOps = 16
	// MaxTxnConds bounds the conditions of one transaction.
	MaxTxnConds = 16
	// MaxTxnValueBytes bounds the sum of a transaction's values: one
	// entry holds no more than the largest single write.
	MaxTxnValueBytes = MaxValueSize
)

// CodeConditionFailed: a transaction's condition did not hold (the token
// no longer holds the lock, the node is at another version, exists or
// does not); nothing was applied. TxnFailure names the condition.
const CodeConditionFailed Code = "condition_failed"

// ErrConditionFailed matches a transaction refused on a condition
// (errors.Is).
var ErrConditionFailed = &Error{Code: CodeConditionFailed}

// TxnOpKind is a transaction write's kind.
type TxnOpKind string

const (
	TxnPut    TxnOpKind = "put"
	TxnCreate TxnOpKind = "create"
	TxnDelete TxnOpKind = "delete"
)

// Valid reports whether k is a known kind.
func (k TxnOpKind) Valid() bool { return k == TxnPut || k == TxnCreate || k == TxnDelete }

// TxnOp is one write of a transaction, with the fields of the single
// write of its kind: put (PutRequest: Version nil overwrites or creates,
// 0 creates only, N compare-and-sets), create (CreateRequest, no lock
// nodes; an ephemeral one is the transaction's session's), delete
// (DeleteRequest).
type TxnOp struct {
	Op          TxnOpKind `json:"op"`
	Path        string    `json:"path"`
	Value       []byte    `json:"value,omitempty"`
	Version     *uint64   `json:"version,omitempty"`
	Ephemeral   bool      `json:"ephemeral,omitempty"`
	Sequential  bool      `json:"sequential,omitempty"`
	MakeParents bool      `json:"make_parents,omitempty"`
	// Container, with MakeParents (put, create): the directories the
	// write makes are containers, deleted with their last child
	// (CreateRequest.Container). Uncontain (put): a container at Path
	// becomes a plain node, as if this put created it (version 1). Both
	// need log codec 3.
	Container bool `json:"container,omitempty"`
	Uncontain bool `json:"uncontain,omitempty"`
}

// TxnCondKind is a transaction condition's kind.
type TxnCondKind string

const (
	// CondHolds: Token holds the lock whose directory is Path (as
	// RouteLockCheck answers).
	CondHolds TxnCondKind = "holds"
	// CondVersion: the node at Path exists at Version.
	CondVersion TxnCondKind = "version"
	// CondMissing: no node at Path.
	CondMissing TxnCondKind = "missing"
	// CondExists: a node at Path.
	CondExists TxnCondKind = "exists"
	// Compares (etcd's, docs/etcd.md), each with Cmp: a missing node's
	// create and mod revisions, version and owner are 0, and a compare
	// of a missing node's value never holds. Revisions are tokens: the
	// index with the prefix's directory epoch in the high bits
	// (api.MakeToken). Need log codec 3 (a cell below answers
	// codec_too_old).
	CondCreateRev  TxnCondKind = "create_rev"  // Rev against the node's create revision
	CondModRev     TxnCondKind = "mod_rev"     // Rev against the node's last create or put
	CondVersionCmp TxnCondKind = "version_cmp" // Version against the node's version
	CondValue      TxnCondKind = "value"       // Value against the node's value (bytes)
	CondOwner      TxnCondKind = "owner"       // Owner against the owning session (0: persistent)
)

// TxnCmp is a compare's operator.
type TxnCmp string

const (
	CmpEqual    TxnCmp = "="
	CmpNotEqual TxnCmp = "!="
	CmpLess     TxnCmp = "<"
	CmpGreater  TxnCmp = ">"
)

// Valid reports whether k is a known kind.
func (k TxnCondKind) Valid() bool {
	return k == CondHolds || k == CondVersion || k == CondMissing || k == CondExists || k.IsCompare()
}

// IsCompare reports whether k is one of etcd's compares (it takes Cmp).
func (k TxnCondKind) IsCompare() bool {
	return k == CondCreateRev || k == CondModRev || k == CondVersionCmp || k == CondValue || k == CondOwner
}

// Valid reports whether c is a known operator.
func (c TxnCmp) Valid() bool {
	return c == CmpEqual || c == CmpNotEqual || c == CmpLess || c == CmpGreater
}

// TxnCond is one condition of a transaction, checked against the state
// the transaction applies to (before any of its writes).
type TxnCond struct {
	If      TxnCondKind `json:"if"`
	Path    string      `json:"path"`
	Token   uint64      `json:"token,omitempty"`   // holds
	Version uint64      `json:"version,omitempty"` // version, version_cmp
	// Cmp is the operator of a compare (create_rev, mod_rev,
	// version_cmp, value, owner); empty for the other kinds.
	Cmp   TxnCmp `json:"cmp,omitempty"`
	Rev   uint64 `json:"rev,omitempty"`   // create_rev, mod_rev
	Value []byte `json:"value,omitempty"` // value
	Owner uint64 `json:"owner,omitempty"` // owner: a session id
}

// TxnRequest commits Then if every condition of If holds, all or nothing.
// Every path lies on one cell. WriteHeader dedupes retries as for single
// writes; a session is needed for an ephemeral create.
type TxnRequest struct {
	WriteHeader
	If   []TxnCond `json:"if,omitempty"`
	Then []TxnOp   `json:"then"`
	// Reads, if set, are range reads answered with the transaction
	// (TxnResponse.Reads), saving a second call: an etcd Txn's branch
	// reads. Not part of the transaction's entry.
	Reads *TxnReads `json:"reads,omitempty"`
}

// TxnReads are a transaction's branch reads: Then answered when it
// applied, Else when a condition failed (none when a write failed). Each
// lies in the transaction's prefix, under its own Root, which the caller
// needs the read role on (as RouteRanges); at most MaxRangesPerRead in
// each branch. They are read from the replica's state right after the
// transaction applied there: a state at its index or later, which was
// the cell's own after the transaction committed (a linearizable read,
// without a ReadIndex).
type TxnReads struct {
	Then []RangeRequest `json:"then,omitempty"`
	Else []RangeRequest `json:"else,omitempty"`
}

// TxnFailure says which part of a refused transaction failed: the
// condition (Kind "if") or write (Kind "then") at Index (from 0), with
// its stable code (condition_failed for a condition; the single write's
// own code for a write: node_exists, forbidden, quota_exceeded, …).
type TxnFailure struct {
	Kind    string `json:"kind"`
	Index   int    `json:"index"`
	Code    Code   `json:"code"`
	Message string `json:"message,omitempty"`
}

// Kinds of TxnFailure.
const (
	TxnFailedIf   = "if"
	TxnFailedThen = "then"
)

// TxnResponse answers a transaction. Succeeded: every write applied at
// Index, Nodes one per write (a create's node as created, with its
// sequence suffix; a put's as written; a delete's as it was). Otherwise
// nothing applied and Failed says why. Epoch is the prefix's directory
// epoch when the transaction was decided (its revision's high bits,
// MakeToken; 0 from a lockd before it). Reads answers the branch's
// TxnReads, or is nil: not asked, or not answered with it (the prefix no
// longer served here, an answer past RouteRanges' bounds): read them
// then with RouteRanges.
type TxnResponse struct {
	Succeeded bool            `json:"succeeded"`
	Index     uint64          `json:"index"`
	Nodes     []Node          `json:"nodes,omitempty"`
	Failed    *TxnFailure     `json:"failed,omitempty"`
	Epoch     uint64          `json:"epoch,omitempty"`
	Reads     *RangesResponse `json:"reads,omitempty"`
}

// Paths are every path the request names, writes then conditions.
func (r *TxnRequest) Paths() []string {
	out := make([]string, 0, len(r.Then)+len(r.If))
	for _, o := range r.Then {
		out = append(out, o.Path)
	}
	for _, c := range r.If {
		out = append(out, c.Path)
	}
	return out
}

// CheckTxnShape checks a transaction's bounds and kinds before it goes
// anywhere: at least one write, at most MaxTxnOps writes and MaxTxnConds
// conditions, MaxTxnValueBytes of values, valid paths and known kinds.
func CheckTxnShape(r *TxnRequest) error {
	if len(r.Then) == 0 {
		return Errorf(CodeBadRequest, "a transaction needs at least one write")
	}
	if len(r.Then) > MaxTxnOps {
		return Errorf(CodeBadRequest, "a transaction has %d writes, limit %d (MaxTxnOps)", len(r.Then), MaxTxnOps)
	}
	if len(r.If) > MaxTxnConds {
		return Errorf(CodeBadRequest, "a transaction has %d conditions, limit %d (MaxTxnConds)", len(r.If), MaxTxnConds)
	}
	total := 0
	for i, o := range r.Then {
		if !o.Op.Valid() {
			return Errorf(CodeBadRequest, "write %d: unknown op %q (put, create, delete)", i, o.Op)
		}
		if err := checkTxnOpFields(i, &o); err != nil {
			return err
		}
		if err := ValidatePath(o.Path); err != nil {
			return Errorf(CodeInvalidPath, "write %d: %v", i, err)
		}
		total += len(o.Value)
	}
	for i, c := range r.If {
		if !c.If.Valid() {
			return Errorf(CodeBadRequest, "condition %d: unknown kind %q (holds, version, missing, exists, create_rev, mod_rev, version_cmp, value, owner)", i, c.If)
		}
		if err := checkTxnCondFields(i, &c); err != nil {
			return err
		}
		if err := ValidatePath(c.Path); err != nil {
			return Errorf(CodeInvalidPath, "condition %d: %v", i, err)
		}
		total += len(c.Value)
	}
	if total > MaxTxnValueBytes {
		return Errorf(CodeValueTooLarge, "a transaction's values (writes and compares) are %d bytes, limit %d (MaxTxnValueBytes)", total, MaxTxnValueBytes)
	}
	return nil
}

// checkTxnCondFields refuses an operator or operand the condition's kind
// does not take: a compare needs a known Cmp and carries only its own
// operand (Rev, Version, Value or Owner); the other kinds carry none of
// Cmp, Rev, Value, Owner (silently ignored, a client's compare would not
// be made).
func checkTxnCondFields(i int, c *TxnCond) error {
	if !c.If.IsCompare() {
		if c.Cmp != "" || c.Rev != 0 || len(c.Value) > 0 || c.Owner != 0 {
			return Errorf(CodeBadRequest, "condition %d: cmp, rev, value and owner are for a compare (create_rev, mod_rev, version_cmp, value, owner), not %s", i, c.If)
		}
		return nil
	}
	if !c.Cmp.Valid() {
		return Errorf(CodeBadRequest, "condition %d: %s compare needs cmp =, !=, < or >, not %q", i, c.If, c.Cmp)
	}
	rev := c.If == CondCreateRev || c.If == CondModRev
	switch {
	case c.Token != 0,
		c.Rev != 0 && !rev,
		c.Version != 0 && c.If != CondVersionCmp,
		len(c.Value) > 0 && c.If != CondValue,
		c.Owner != 0 && c.If != CondOwner:
		return Errorf(CodeBadRequest, "condition %d: a %s compare takes only its own operand (create_rev, mod_rev: rev; version_cmp: version; value: value; owner: owner)", i, c.If)
	}
	return nil
}

// checkTxnOpFields refuses a field the write's kind does not take (its
// single write has no such field): silently ignored, an ephemeral put
// would leave a persistent node behind, a create's version would not be
// compared.
func checkTxnOpFields(i int, o *TxnOp) error {
	switch {
	case o.Op != TxnCreate && (o.Ephemeral || o.Sequential):
		return Errorf(CodeBadRequest, "write %d: ephemeral and sequential are for a create, not a %s", i, o.Op)
	case o.Op == TxnCreate && o.Version != nil:
		return Errorf(CodeBadRequest, "write %d: a create takes no version (a put at version 0 creates only)", i)
	case o.Op == TxnDelete && (len(o.Value) > 0 || o.MakeParents):
		return Errorf(CodeBadRequest, "write %d: a delete takes no value and no make_parents", i)
	case o.Container && !o.MakeParents:
		return Errorf(CodeBadRequest, "write %d: container is for a write with make_parents: it marks the directories the write makes", i)
	case o.Uncontain && o.Op != TxnPut:
		return Errorf(CodeBadRequest, "write %d: uncontain is for a put, not a %s", i, o.Op)
	}
	return nil
}
