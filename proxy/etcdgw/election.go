package etcdgw

import (
	"context"
	"fmt"
	"time"

	"github.com/lockservice/lockd/api"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Election (v3electionpb, docs/etcd.md "Election"). A candidate is an
// ephemeral sequential child of the election's path (the name is a key:
// "e1" is /etcd/e1), made with the lease's session on the name's cell,
// its parents containers; the leader is the child with the lowest create
// revision (children are compared by create index, not by name: keys
// etcd's concurrency package writes under the same name, name/<lease
// hex>, take part as they do in etcd). Every read is a range read with
// the caller's token; every write goes with the lease's session.

// Bounds of elections.
const (
	// MaxCampaigners bounds the Campaign calls one tenant has waiting at
	// one gateway.
	MaxCampaigners = 1000
	// MaxObservers bounds the Observe streams one tenant holds open at
	// one gateway.
	MaxObservers = 1000
	// ObserveRecheckInterval: an observer re-reads the election at least
	// this often, whatever the change feed says (a safety net).
	ObserveRecheckInterval = 5 * time.Second
	// campaignCleanup bounds the delete of a candidate whose Campaign was
	// canceled (etcd resigns it, so must this).
	campaignCleanup = 5 * time.Second
)

// Election errors, etcd's messages.
var (
	errNotLeader     = status.Error(codes.FailedPrecondition, "election: not leader")
	errNoLeader      = status.Error(codes.NotFound, "election: no leader")
	errMissingLeader = status.Error(codes.InvalidArgument, `"leader" field must be provided`)
	errCandidateGone = status.Error(codes.FailedPrecondition, "election: the candidate's key was deleted while it campaigned (its lease ended, or it resigned)")
)

type electionServer struct {
	v3electionpb.UnimplementedElectionServer
	g *Gateway
}

// election is one election's name as a path.
type election struct {
	name keyPath
	w    who
}

// electionOf maps an election name.
func (g *Gateway) electionOf(ctx context.Context, name []byte) (election, error) {
	w, err := g.who(ctx)
	if err != nil {
		return election{}, err
	}
	p, err := g.keys.path(name)
	if err != nil {
		return election{}, err
	}
	return election{name: p, w: w}, nil
}

// candidates reads the election's children (not containers) with the
// caller's token.
func (g *Gateway) candidates(ctx context.Context, e election, keysOnly bool) (api.RangeResponse, error) {
	var resp api.RangeResponse
	root := e.name.Path
	err := g.be.Call(ctx, e.w.token, api.RouteRange, &api.RangeRequest{Root: root, Start: root + "/", End: root + "0", KeysOnly: keysOnly, SkipContainers: true}, &resp)
	if resp.Epoch == 0 {
		resp.Epoch = e.name.Prefix.Epoch
	}
	return resp, err
}

// leaderOf is the child with the lowest create index (nil: none).
func leaderOf(nodes []api.Node) *api.Node {
	var l *api.Node
	for i := range nodes {
		if l == nil || nodes[i].CreateIndex < l.CreateIndex {
			l = &nodes[i]
		}
	}
	return l
}

// predecessorOf is the child created last before create (nil: none).
func predecessorOf(nodes []api.Node, create uint64) *api.Node {
	var p *api.Node
	for i := range nodes {
		if c := nodes[i].CreateIndex; c < create && (p == nil || c > p.CreateIndex) {
			p = &nodes[i]
		}
	}
	return p
}

// electionKV is a node of the election as an etcd key-value.
func (g *Gateway) electionKV(e election, epoch uint64, n api.Node) *mvccpb.KeyValue {
	kv := &mvccpb.KeyValue{
		Key:            g.keys.key(n.Path, e.name.Rel),
		CreateRevision: rev(epoch, n.CreateIndex),
		ModRevision:    rev(epoch, n.ModifyIndex),
		Version:        int64(n.Version),
		Value:          n.Value,
	}
	if n.Ephemeral {
		kv.Lease = g.leases.leaseOf(e.name.Prefix.Cell, n.Owner)
	}
	return kv
}

// prefixAt is e's prefix with the epoch a read answered.
func (e election) prefixAt(epoch uint64) PrefixInfo {
	p := e.name.Prefix
	p.Epoch = epoch
	return p
}

// Leader answers the election's leader: its key-value.
func (s *electionServer) Leader(ctx context.Context, r *v3electionpb.LeaderRequest) (*v3electionpb.LeaderResponse, error) {
	e, err := s.g.electionOf(ctx, r.Name)
	if err != nil {
		return nil, err
	}
	resp, err := s.g.candidates(ctx, e, false)
	if err != nil {
		return nil, grpcError(err)
	}
	l := leaderOf(resp.Nodes)
	if l == nil {
		return nil, errNoLeader
	}
	return &v3electionpb.LeaderResponse{Header: s.g.header(e.prefixAt(resp.Epoch), resp.Index), Kv: s.g.electionKV(e, resp.Epoch, *l)}, nil
}

// leaderKey checks a LeaderKey and maps it.
func (g *Gateway) leaderKey(ctx context.Context, k *v3electionpb.LeaderKey) (election, keyPath, error) {
	if k == nil {
		return election{}, keyPath{}, errMissingLeader
	}
	e, err := g.electionOf(ctx, k.Name)
	if err != nil {
		return election{}, keyPath{}, err
	}
	kp, err := g.keys.path(k.Key)
	if err != nil {
		return election{}, keyPath{}, err
	}
	if api.Parent(kp.Path) != e.name.Path {
		return election{}, keyPath{}, status.Errorf(codes.InvalidArgument, "leader key %q is not a candidate of election %q", k.Key, k.Name)
	}
	return e, kp, nil
}

// Proclaim puts a new value on the leader's key, only while the key is
// the leader's (its create revision is leader.rev): a transaction with a
// create-revision compare, by the lease's session (the key's owner).
func (s *electionServer) Proclaim(ctx context.Context, r *v3electionpb.ProclaimRequest) (*v3electionpb.ProclaimResponse, error) {
	e, kp, err := s.g.leaderKey(ctx, r.Leader)
	if err != nil {
		return nil, err
	}
	hdr, err := s.g.leases.session(ctx, e.w, r.Leader.Lease, kp.Prefix)
	if err != nil {
		return nil, grpcError(err)
	}
	txn := &api.TxnRequest{WriteHeader: hdr,
		If:   []api.TxnCond{{If: api.CondCreateRev, Path: kp.Path, Cmp: api.CmpEqual, Rev: uint64(r.Leader.Rev)}},
		Then: []api.TxnOp{{Op: api.TxnPut, Path: kp.Path, Value: r.Value}}}
	var resp api.TxnResponse
	err = s.g.be.Call(ctx, e.w.token, api.RouteTxn, txn, &resp)
	if api.CodeOf(err) == api.CodeConditionFailed || (err == nil && !resp.Succeeded) {
		return nil, errNotLeader
	}
	if err != nil {
		return nil, grpcError(err)
	}
	return &v3electionpb.ProclaimResponse{Header: s.g.header(kp.Prefix, resp.Index)}, nil
}

// Resign deletes the leader's key if it is still the one of leader.rev
// (else nothing: etcd's Resign does not fail on a key that changed).
func (s *electionServer) Resign(ctx context.Context, r *v3electionpb.ResignRequest) (*v3electionpb.ResignResponse, error) {
	e, kp, err := s.g.leaderKey(ctx, r.Leader)
	if err != nil {
		return nil, err
	}
	index, err := s.g.resign(ctx, e.w, r.Leader.Lease, kp, uint64(r.Leader.Rev))
	if err != nil {
		return nil, grpcError(err)
	}
	return &v3electionpb.ResignResponse{Header: s.g.header(kp.Prefix, index)}, nil
}

// resign deletes kp if its create revision is createRev, with lease's
// session; the index of the answer.
func (g *Gateway) resign(ctx context.Context, w who, lease int64, kp keyPath, createRev uint64) (uint64, error) {
	hdr, err := g.leases.session(ctx, w, lease, kp.Prefix)
	if err != nil {
		return 0, err
	}
	txn := &api.TxnRequest{WriteHeader: hdr,
		If:   []api.TxnCond{{If: api.CondCreateRev, Path: kp.Path, Cmp: api.CmpEqual, Rev: createRev}},
		Then: []api.TxnOp{{Op: api.TxnDelete, Path: kp.Path}}}
	var resp api.TxnResponse
	err = g.be.Call(ctx, w.token, api.RouteTxn, txn, &resp)
	if api.CodeOf(err) == api.CodeConditionFailed {
		return resp.Index, nil // not the leader's key (any more): nothing to resign
	}
	return resp.Index, err
}

// candidateName is the name a lease's candidate child gets before its
// sequence suffix: the lease in hex, as etcd's candidates are named.
func candidateName(lease int64) string { return fmt.Sprintf("%x_", lease) }
