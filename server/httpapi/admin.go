package httpapi

// The cluster operations (admin only): snapshots and backups, the
// directory's commands, migration steps, membership, leadership transfer.

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/dirfsm"
)

// snapshot saves a snapshot on this replica, leader or not.
func (s *Server) snapshot(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.SnapshotRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	c, ok := s.host.Cell(req.Cell)
	if !ok {
		return nil, api.Errorf(api.CodeWrongCell, "cell %q is not hosted by this lockd", req.Cell)
	}
	// A large state takes seconds to write; a minute bounds a stuck disk.
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.Snapshot(cctx)
}

// backup exports a snapshot of the cell to the backup store, on its leader
// (a follower answers not_leader, so the backup is of the newest state).
func (s *Server) backup(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.BackupRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if s.backupFn == nil {
		return nil, api.Errorf(api.CodeBadRequest, "this lockd has no backup store: start it with --backup-dir")
	}
	if _, err := s.readyCell(ctx, req.Cell); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return s.backupFn(cctx, req.Cell)
}

// --- directory administration ---

// proposeDirectory commits cmd to the directory group.
func (s *Server) proposeDirectory(cmd *dirfsm.Command) (any, error) {
	cctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	return s.host.ProposeDirectory(cctx, cmd)
}

func (s *Server) createCell(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.CreateCellRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	return s.proposeDirectory(&dirfsm.Command{Op: dirfsm.OpCreateCell, CreateCell: &req})
}

func (s *Server) restoreCell(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.RestoreCellRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	return s.proposeDirectory(&dirfsm.Command{Op: dirfsm.OpRestore, Restore: &req})
}

func (s *Server) assignPrefix(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.AssignPrefixRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	return s.proposeDirectory(&dirfsm.Command{Op: dirfsm.OpAssign, Assign: &req})
}

func (s *Server) registerLockd(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.RegisterLockdRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	return s.proposeDirectory(&dirfsm.Command{Op: dirfsm.OpRegister, Lockd: &req.LockdInfo})
}

// commitTenant commits a tenant change a lockd forwards to a directory
// replica (any new token's digest already made there).
func (s *Server) commitTenant(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req dirfsm.TenantChange
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	return s.proposeDirectory(&dirfsm.Command{Op: dirfsm.OpTenant, Tenant: &req})
}

// recordMember records one step of a membership change in the directory
// (a cell leader's forward: its lockd holds no directory replica).
func (s *Server) recordMember(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.MemberRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	return s.proposeDirectory(&dirfsm.Command{Op: dirfsm.OpMember, Member: &req})
}

func (s *Server) registerProxy(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.ProxyInfo
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	return s.proposeDirectory(&dirfsm.Command{Op: dirfsm.OpRegisterProxy, Proxy: &req})
}

// migrate commits one step of a prefix's move in the directory.
func (s *Server) migrate(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.MigrateRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	v, err := s.proposeDirectory(&dirfsm.Command{Op: dirfsm.OpMigrate, Migrate: &req, AtMS: time.Now().UnixMilli()})
	if err == nil {
		s.log.Info("migration step", "prefix", req.Prefix, "action", req.Action, "to", req.To, "began_at", req.BeganAt)
	}
	return v, err
}

// --- operations on a cell's leader ---

// prefixOp runs a migration step on the named cell's leader.
func (s *Server) prefixOp(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.PrefixOpRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	if err := api.ValidatePath(req.Prefix); err != nil || api.Parent(req.Prefix) != "/" {
		return nil, api.Errorf(api.CodeInvalidPath, "%q is not a top-level prefix", req.Prefix)
	}
	c, err := s.readyCell(ctx, req.Cell)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.Background(), prefixOpTimeout(req.Op))
	defer cancel()
	v, err := c.PrefixOp(cctx, req)
	if err == nil && (req.Op != api.PrefixStage || req.First || req.Last) { // one line per copy, not per page
		s.log.Info("migration step", "cell", req.Cell, "prefix", req.Prefix, "op", req.Op, "to", req.To, "dir_index", req.DirIndex, "epoch", req.Epoch, "first", req.First, "last", req.Last)
	}
	return v, err
}

// member runs one membership change on the named cell's leader.
func (s *Server) member(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.MemberRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	switch req.Action {
	case api.MemberAdd, api.MemberPromote, api.MemberRemove:
	default:
		return nil, api.Errorf(api.CodeBadRequest, "member action %q: use add, promote or remove", req.Action)
	}
	if req.Lockd == 0 {
		return nil, api.Errorf(api.CodeBadRequest, "name the lockd (its id)")
	}
	c, err := s.readyCell(ctx, req.Cell)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return s.host.ChangeMember(cctx, c, req)
}

// transfer hands the named cell's leadership to its replica on another lockd.
func (s *Server) transfer(ctx *fasthttp.RequestCtx, p principal) (any, error) {
	if err := needAdmin(p); err != nil {
		return nil, err
	}
	var req api.TransferRequest
	if err := decode(ctx, &req); err != nil {
		return nil, err
	}
	c, err := s.readyCell(ctx, req.Cell)
	if err != nil {
		return nil, err
	}
	info, ok := s.host.Directory().Cell(req.Cell)
	if !ok {
		return nil, api.Errorf(api.CodeNotFound, "no cell %s", req.Cell)
	}
	for _, r := range info.Replicas {
		if r.Lockd == req.To && !r.Learner {
			return struct{}{}, c.TransferTo(r.ReplicaID)
		}
	}
	return nil, api.Errorf(api.CodeNotFound, "cell %s has no voting replica on lockd %d", req.Cell, req.To)
}

// prefixOpTimeout bounds one prefix op: a read (a prefix's state, a page
// of its export) as any read, so that one caught behind a leadership
// change (a ReadIndex the old leader dropped) is answered unavailable in
// RequestTimeout and retried, not held for a minute; a write (seal,
// stage, drop) may wait a minute for its commit.
func prefixOpTimeout(op string) time.Duration {
	switch op {
	case api.PrefixState, api.PrefixExport:
		return RequestTimeout
	}
	return time.Minute
}
