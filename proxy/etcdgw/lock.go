package etcdgw

import (
	"context"
	"strings"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"

	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The Lock service (docs/etcd.md, "Lock") with the lock service's own
// lock nodes, not etcd's key dance: Lock(name, lease) creates an
// ephemeral, sequential, exclusive lock node under the path of name,
// owned by the lease's session on that cell (lock-delay from
// Config.LockDelay, parents made as containers), waits until it holds,
// and answers its key; the node's create revision is its fencing token.

// lockNodeName is the name a lock node gets before its sequence number
// (the SDK's exclusive lock nodes are named so too: sdk.LockNodePrefix).
const lockNodeName = "w-"

// maxLockCreateAttempts bounds the tries of a lock node's create whose
// outcome was unknown (the same request id: the cell dedupes).
const maxLockCreateAttempts = 3

// lockServer serves v3lockpb.Lock.
type lockServer struct {
	v3lockpb.UnimplementedLockServer
	g       *Gateway
	waiters lockWaiters
}

// Lock takes the lock name with the caller's lease, waiting for it.
func (s *lockServer) Lock(ctx context.Context, r *v3lockpb.LockRequest) (*v3lockpb.LockResponse, error) {
	w, err := s.g.who(ctx)
	if err != nil {
		return nil, err
	}
	if r.Lease == 0 {
		return nil, errNoLockLease
	}
	p, err := s.g.keys.path(lockName(r.Name))
	if err != nil {
		return nil, err
	}
	release, err := s.waiters.enter(tenantOf(w))
	if err != nil {
		return nil, err
	}
	defer release()
	hdr, err := s.g.leases.session(ctx, w, r.Lease, p.Prefix)
	if err != nil {
		return nil, grpcError(err)
	}
	cr, err := s.lockNode(ctx, w, p, r.Lease, hdr)
	if err != nil {
		return nil, grpcError(err)
	}
	index := cr.Index
	if cr.WaitFor != "" && !mutant.On(mutant.EtcdLockEarly) {
		index, err = s.wait(ctx, w, p.Prefix, hdr, cr)
		if err != nil {
			s.abandon(ctx, w, r.Lease, p, cr.Node.Path)
			return nil, grpcError(err)
		}
	}
	return &v3lockpb.LockResponse{Header: s.g.header(p.Prefix, index), Key: s.g.keys.key(cr.Node.Path, p.Rel)}, nil
}

// lockName is a Lock's name as a key: one trailing "/" is dropped (etcd
// clients often name a lock "prefix/"; a path has none).
func lockName(name []byte) []byte {
	if n := len(name); n > 1 && name[n-1] == '/' {
		return name[:n-1]
	}
	return name
}

// lockNode is the lease's lock node of p: the one a Lock of the same
// name with the same lease made, if it still exists (etcd: locking
// twice with one lease is one acquisition), else a new one.
func (s *lockServer) lockNode(ctx context.Context, w who, p keyPath, lease int64, hdr api.WriteHeader) (api.CreateResponse, error) {
	node := s.g.leases.lockNode(w, lease, p.Path)
	if node == "" {
		node = s.queuedNode(ctx, w, p, hdr.Session)
	}
	if node != "" {
		var st api.LockStateResponse
		req := api.LockStateRequest{Path: node, Session: hdr.Session, Secret: hdr.Secret}
		if err := s.g.be.Call(ctx, w.token, api.RouteLockState, req, &st); err == nil && st.Exists {
			s.g.leases.setLockNode(w, lease, p.Path, node)
			return api.CreateResponse{Node: api.Node{Path: node}, Index: st.Index, WaitFor: st.WaitFor}, nil
		}
	}
	cr, err := s.createLockNode(ctx, w, p, hdr)
	if err == nil {
		s.g.leases.setLockNode(w, lease, p.Path, cr.Node.Path)
	}
	return cr, err
}

// queuedNode is a lock node of p the lease's session already has that
// the lease does not remember: its create applied but the answer was
// lost, or an abandoned Lock's delete failed. Without it, the client's
// retried Lock would queue a second node behind its own first and wait
// as long as the lease lives (attack review, session 34). "" if there is
// none, or the caller may not read the lock's directory.
func (s *lockServer) queuedNode(ctx context.Context, w who, p keyPath, session uint64) string {
	first := api.Join(p.Path, lockNodeName)
	past := first[:len(first)-1] + string(first[len(first)-1]+1) // the first string after every name "w-..."
	req := api.RangeRequest{Root: p.Path, Start: first, End: past, KeysOnly: true}
	var rr api.RangeResponse
	if err := s.g.be.Call(ctx, w.token, api.RouteRange, req, &rr); err != nil {
		return ""
	}
	for _, n := range rr.Nodes {
		if n.Ephemeral && n.Owner == session && n.Lock != api.LockNone && api.Parent(n.Path) == p.Path {
			return n.Path
		}
	}
	return ""
}

// createLockNode creates the lock node, retrying an unknown outcome
// with the same request id (the cell answers the first attempt's node).
func (s *lockServer) createLockNode(ctx context.Context, w who, p keyPath, hdr api.WriteHeader) (api.CreateResponse, error) {
	req := api.CreateRequest{
		WriteHeader: hdr, Path: api.Join(p.Path, lockNodeName),
		Ephemeral: true, Sequential: true, Lock: api.LockExclusive,
		MakeParents: true, Container: true,
		LockDelayMS: s.g.cfg.LockDelay.Milliseconds(),
	}
	var resp api.CreateResponse
	var err error
	for range maxLockCreateAttempts {
		if err = s.g.be.Call(ctx, w.token, api.RouteCreate, req, &resp); err == nil || knownRefusal(err) || ctx.Err() != nil {
			break
		}
	}
	return resp, err
}

// wait waits until the lock node holds the lock: for the sibling it
// waits for to go (g.changes.waitGone), or a lock-delay to pass, then
// re-checks the node's state with its session (its own node and session
// must still exist at an index at least the wake-up's: pitfall 2). It
// answers the index the grant was seen at.
func (s *lockServer) wait(ctx context.Context, w who, p PrefixInfo, hdr api.WriteHeader, cr api.CreateResponse) (uint64, error) {
	// In a lock-delay the cell names the lock's directory to wait for
	// (fsm waitOn): that is polled, not waited on to go.
	dir := cr.Node.Path[:strings.LastIndexByte(cr.Node.Path, '/')]
	waitFor, index := cr.WaitFor, cr.Index
	delay := waitFor == dir
	for range MaxLockWaitRounds {
		if err := s.waitOne(ctx, p, waitFor, index, delay); err != nil {
			return 0, err
		}
		var st api.LockStateResponse
		req := api.LockStateRequest{Path: cr.Node.Path, Session: hdr.Session, Secret: hdr.Secret}
		if err := s.g.be.Call(ctx, w.token, api.RouteLockState, req, &st); err != nil {
			if knownRefusal(err) || ctx.Err() != nil {
				return 0, err
			}
			delay = true // unknown: re-check after a pause
			continue
		}
		switch {
		case !st.Exists:
			return 0, errLockLost
		case st.Held:
			return max(st.Index, index), nil
		}
		waitFor, index, delay = st.WaitFor, max(st.Index, index), st.Delay != nil || st.WaitFor == dir
	}
	return 0, errTooMany("MaxLockWaitRounds", MaxLockWaitRounds, "wake-ups of one Lock")
}

// waitOne waits for waitFor's deletion after index, or, in a lock-delay
// (or after a failed re-check), for lockPollInterval.
func (s *lockServer) waitOne(ctx context.Context, p PrefixInfo, waitFor string, index uint64, delay bool) error {
	if !delay && s.g.changes != nil {
		return s.g.changes.waitGone(ctx, p, waitFor, index)
	}
	t := time.NewTimer(lockPollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errLockLost: the lock node went while waiting (its lease ended).
var errLockLost = status.Error(codes.NotFound, "etcdserver: requested lease not found: the lock's lease ended while waiting; its lock node is gone")

// abandon deletes the lock node of a Lock that will not answer a grant
// (its caller went away), so it does not stay queued. An ephemeral node
// is deleted with its owning session's header.
func (s *lockServer) abandon(ctx context.Context, w who, lease int64, p keyPath, path string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockCleanupTimeout)
	defer cancel()
	s.g.leases.setLockNode(w, lease, p.Path, "")
	hdr, err := s.g.leases.session(cctx, w, lease, p.Prefix)
	if err != nil {
		return // the lease is gone: so is its node
	}
	var resp api.WriteResponse
	if err := s.g.be.Call(cctx, w.token, api.RouteDelete, api.DeleteRequest{WriteHeader: hdr, Path: path}, &resp); err != nil && api.CodeOf(err) != api.CodeNoNode {
		s.g.log.Warn("etcd Lock: could not delete an abandoned lock node; it goes with its lease", "path", path, "err", err)
	}
}

// Unlock deletes the lock node key names (as etcd deletes the key), with
// its owning session's header (the session of one of the caller's
// leases: another credential's lock node is refused as the cell refuses
// it); a node that is not a lock node is refused, one already gone is
// fine.
func (s *lockServer) Unlock(ctx context.Context, r *v3lockpb.UnlockRequest) (*v3lockpb.UnlockResponse, error) {
	// A lock of another gateway's lease is released there (forward.go).
	return orAtPeers(ctx, s.g, "/v3lockpb.Lock/Unlock", r, func() *v3lockpb.UnlockResponse { return &v3lockpb.UnlockResponse{} },
		func() (*v3lockpb.UnlockResponse, error) { return s.unlock(ctx, r) })
}

// unlock is Unlock here.
func (s *lockServer) unlock(ctx context.Context, r *v3lockpb.UnlockRequest) (*v3lockpb.UnlockResponse, error) {
	w, err := s.g.who(ctx)
	if err != nil {
		return nil, err
	}
	p, err := s.g.keys.path(r.Key)
	if err != nil {
		return nil, err
	}
	var gr api.GetResponse
	err = s.g.be.Call(ctx, w.token, api.RouteGet, api.ReadRequest{Path: p.Path}, &gr)
	if api.CodeOf(err) == api.CodeNoNode {
		return &v3lockpb.UnlockResponse{Header: s.g.header(p.Prefix, 0)}, nil
	}
	if err != nil {
		return nil, grpcError(err)
	}
	if gr.Node.Lock == api.LockNone {
		return nil, status.Errorf(codes.FailedPrecondition, "lockd etcd gateway: %q is not a lock node: Unlock takes the key Lock answered", truncKey(r.Key))
	}
	var hdr api.WriteHeader
	lease := s.g.leases.leaseOf(p.Prefix.Cell, gr.Node.Owner)
	if lease != 0 {
		if hdr, err = s.g.leases.session(ctx, w, lease, p.Prefix); err != nil && err != errLeaseNotFound {
			return nil, grpcError(err)
		}
		s.g.leases.setLockNode(w, lease, p.Path[:strings.LastIndexByte(p.Path, '/')], "")
	}
	var resp api.WriteResponse
	err = s.g.be.Call(ctx, w.token, api.RouteDelete, api.DeleteRequest{WriteHeader: hdr, Path: p.Path}, &resp)
	if err != nil && api.CodeOf(err) != api.CodeNoNode {
		return nil, elsewhere(grpcError(err), lease == 0 && gr.Node.Owner != 0) // forward.go
	}
	return &v3lockpb.UnlockResponse{Header: s.g.header(p.Prefix, max(resp.Index, gr.Index))}, nil
}
