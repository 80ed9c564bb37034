package sdk

// Transactions: a few writes on one cell, committed in one entry only if
// every condition holds (api.TxnRequest), and Mutex.Guard, the writes
// that commit only while the mutex's token still holds its lock.

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockservice/lockd/api"
)

// Txn is a transaction being built: Client.Txn(ctx).If(conditions…).
// Then(writes…).Commit(). Not safe for concurrent use.
type Txn struct {
	c   *Client
	ctx context.Context
	s   *Session // Mutex.Guard's: the grant's session; nil: the cell's
	req api.TxnRequest
}

// TxnResult is a committed transaction: the Raft index it applied at and
// one node per write (a create's as created, with its sequence suffix; a
// put's as written; a delete's as it was).
type TxnResult struct {
	Index uint64
	Nodes []api.Node
}

// TxnError is a transaction the cell refused on one condition or write:
// nothing applied. errors.Is(err, api.ErrConditionFailed) matches a
// failed condition; a failed write matches its own code (api.ErrNodeExists,
// api.ErrForbidden, …); errors.As gives the index.
type TxnError struct {
	Failure api.TxnFailure
}

func (e *TxnError) Error() string {
	what := "condition"
	if e.Failure.Kind == api.TxnFailedThen {
		what = "write"
	}
	return fmt.Sprintf("transaction refused at %s %d: %s: %s", what, e.Failure.Index, e.Failure.Code, e.Failure.Message)
}

// Unwrap is the failure as an *api.Error, for errors.Is on its code.
func (e *TxnError) Unwrap() error {
	return &api.Error{Code: e.Failure.Code, Message: e.Failure.Message}
}

// Txn starts a transaction on the cell of its writes' paths (every path
// a transaction names lies on one cell).
func (c *Client) Txn(ctx context.Context) *Txn {
	return &Txn{c: c, ctx: ctx}
}

// If adds conditions (IfHolds, IfVersion, IfMissing, IfExists); every
// one must hold for the writes to commit. At most api.MaxTxnConds.
func (t *Txn) If(conds ...api.TxnCond) *Txn {
	t.req.If = append(t.req.If, conds...)
	return t
}

// Then adds writes (PutOp, CreateOp, DeleteOp), applied in order, all or
// none. At most api.MaxTxnOps, api.MaxTxnValueBytes of values in all.
func (t *Txn) Then(ops ...api.TxnOp) *Txn {
	t.req.Then = append(t.req.Then, ops...)
	return t
}

// IfHolds: token holds the lock whose directory is dir (a Mutex's path).
func IfHolds(dir string, token uint64) api.TxnCond {
	return api.TxnCond{If: api.CondHolds, Path: dir, Token: token}
}

// IfVersion: the node at path exists at version.
func IfVersion(path string, version uint64) api.TxnCond {
	return api.TxnCond{If: api.CondVersion, Path: path, Version: version}
}

// IfMissing: no node at path.
func IfMissing(path string) api.TxnCond { return api.TxnCond{If: api.CondMissing, Path: path} }

// IfExists: a node at path.
func IfExists(path string) api.TxnCond { return api.TxnCond{If: api.CondExists, Path: path} }

// PutOp writes value at path (creating a persistent node, and its missing
// parents, as Put does; set MakeParents false to refuse a missing parent,
// Version for a compare-and-set, 0 for create-only).
func PutOp(path string, value []byte) api.TxnOp {
	if value == nil {
		value = []byte{}
	}
	return api.TxnOp{Op: api.TxnPut, Path: path, Value: value, MakeParents: true}
}

// CreateOp creates the node at path and its missing parents, as Create
// does (set Ephemeral, Sequential as for Create; MakeParents false to
// refuse a missing parent; an ephemeral node is the session's).
func CreateOp(path string, value []byte) api.TxnOp {
	return api.TxnOp{Op: api.TxnCreate, Path: path, Value: value, MakeParents: true}
}

// DeleteOp deletes the childless node at path.
func DeleteOp(path string) api.TxnOp { return api.TxnOp{Op: api.TxnDelete, Path: path} }

// Commit sends the transaction: a TxnResult if every write applied, a
// *TxnError if a condition or write was refused (nothing applied), or
// another error (then, as for any write, the outcome may be unknown:
// ErrOutcomeUnknown). A retry of the same request is never applied twice.
func (t *Txn) Commit(ctx context.Context) (TxnResult, error) {
	if ctx == nil {
		ctx = t.ctx
	}
	if err := api.CheckTxnShape(&t.req); err != nil {
		return TxnResult{}, err
	}
	needSession := false
	for _, o := range t.req.Then {
		needSession = needSession || o.Ephemeral
	}
	var resp api.TxnResponse
	send := func(cs *cellState) error {
		t.req.WriteHeader = api.WriteHeader{} // a fresh request id on the new cell's session
		if t.s != nil {
			return t.s.write(ctx, &t.req.WriteHeader, api.RouteTxn, &t.req, &resp)
		}
		return t.c.write(ctx, cs, needSession, &t.req.WriteHeader, api.RouteTxn, &t.req, &resp)
	}
	var err error
	if t.s != nil {
		err = send(nil)
	} else {
		err = t.c.routed(ctx, t.req.Then[0].Path, send)
	}
	if err != nil {
		return TxnResult{}, err
	}
	if !resp.Succeeded {
		if resp.Failed == nil {
			return TxnResult{}, api.Errorf(api.CodeInternal, "transaction answered neither applied nor refused")
		}
		return TxnResult{}, &TxnError{Failure: *resp.Failed}
	}
	return TxnResult{Index: resp.Index, Nodes: resp.Nodes}, nil
}

// Guard commits ops (on the lock's cell) only while this mutex's token
// still holds its lock: the cell checks the token in the same entry that
// applies them, so a holder paused past its lease, whose lock another
// took, never writes (the strongest fence for state kept in the service).
// It fails with an error matching ErrNotHeld if nothing is held here, and
// one matching ErrLockLost and api.ErrConditionFailed if the token no
// longer holds (the Mutex then reports the lock lost). conds are further
// conditions, checked after the token's.
func (m *Mutex) Guard(ctx context.Context, ops []api.TxnOp, conds ...api.TxnCond) (TxnResult, error) {
	m.mu.Lock()
	g := m.g
	if g == nil || g.released {
		m.mu.Unlock()
		return TxnResult{}, recipeErr(codeNotHeld, nil, "mutex %s is not held", m.path)
	}
	if g.lost != nil {
		err := g.lost
		m.mu.Unlock()
		return TxnResult{}, recipeErr(codeNotHeld, err, "%s", m.path)
	}
	m.mu.Unlock()
	t := &Txn{c: m.c, ctx: ctx, s: g.s}
	t.If(IfHolds(m.path, g.token)).If(conds...).Then(ops...)
	res, err := t.Commit(ctx)
	var te *TxnError
	switch {
	case errors.As(err, &te) && te.Failure.Kind == api.TxnFailedIf && te.Failure.Index == 0:
		m.lose(g, nil, "its token no longer holds the lock")
		return res, recipeErr(codeLockLost, err, "%s: guarded write refused", m.path)
	case sessionGone(err):
		m.lose(g, err, "its session ended")
		return res, recipeErr(codeLockLost, err, "%s: guarded write refused", m.path)
	}
	return res, err
}
