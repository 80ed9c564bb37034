package fake

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// txnLocked commits a transaction as a cell's leader does (no tenants:
// every write an admin's), answering a refusal that names a condition
// or write with Succeeded false, as server/cell's Txn.
func (c *Cell) txnLocked(req api.TxnRequest) (int, any) {
	if err := api.CheckTxnShape(&req); err != nil {
		return refuse(api.AsError(err))
	}
	cmd := &fsm.Command{Op: fsm.OpTxn, WriteHeader: req.WriteHeader, If: req.If, Admin: true}
	for _, o := range req.Then {
		cmd.Then = append(cmd.Then, fsm.TxnOp{TxnOp: o})
	}
	res := c.proposeLocked(cmd)
	if res.FailedIf > 0 || res.FailedThen > 0 {
		f := &api.TxnFailure{Kind: api.TxnFailedIf, Index: res.FailedIf - 1, Code: res.Err.Code, Message: res.Err.Message}
		if res.FailedThen > 0 {
			f.Kind, f.Index = api.TxnFailedThen, res.FailedThen-1
		}
		return 200, api.TxnResponse{Index: res.Index, Failed: f}
	}
	if res.Err != nil {
		return refuse(res.Err)
	}
	return 200, api.TxnResponse{Succeeded: true, Index: res.Index, Nodes: res.TxnNodes}
}
