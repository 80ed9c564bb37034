package etcdgw

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Forwarding (docs/etcd.md, "Several gateways"): a lease lives in the
// gateway that granted it (its session's secret is that gateway's), and
// its id carries that gateway's tag (lease_id.go). A request about a
// lease with another gateway's tag - a Put or Txn writing with it,
// LeaseRevoke, LeaseTimeToLive, Lock, Campaign, Proclaim, Resign, a
// KeepAlive - is sent on to that gateway with the caller's own token,
// and its answer returned: the granting gateway checks the token as
// for any call (a lease stays bound to the credential that granted it).
// A request forwarded once carries forwardedKey and is never forwarded
// again. A tag no known gateway has is answered here (lease not found).

// forwardedKey marks a forwarded request's metadata.
const forwardedKey = "lockd-etcd-forwarded"

// forwardedResponses make the response of each method that may be
// forwarded.
var forwardedResponses = map[string]func() proto.Message{
	"/etcdserverpb.KV/Put":                func() proto.Message { return &pb.PutResponse{} },
	"/etcdserverpb.KV/Txn":                func() proto.Message { return &pb.TxnResponse{} },
	"/etcdserverpb.Lease/LeaseRevoke":     func() proto.Message { return &pb.LeaseRevokeResponse{} },
	"/etcdserverpb.Lease/LeaseTimeToLive": func() proto.Message { return &pb.LeaseTimeToLiveResponse{} },
	"/v3lockpb.Lock/Lock":                 func() proto.Message { return &v3lockpb.LockResponse{} },
	"/v3electionpb.Election/Campaign":     func() proto.Message { return &v3electionpb.CampaignResponse{} },
	"/v3electionpb.Election/Proclaim":     func() proto.Message { return &v3electionpb.ProclaimResponse{} },
	"/v3electionpb.Election/Resign":       func() proto.Message { return &v3electionpb.ResignResponse{} },
}

// leaseOfRequest is the lease a request names (0: none).
func leaseOfRequest(req any) int64 {
	switch r := req.(type) {
	case *pb.PutRequest:
		return r.Lease
	case *pb.TxnRequest:
		for _, op := range r.Success {
			if p := op.GetRequestPut(); p != nil && p.Lease != 0 {
				return p.Lease
			}
		}
		for _, c := range r.Compare {
			if c.Target == pb.Compare_LEASE && c.GetLease() != 0 {
				return c.GetLease() // the owner it names is the lease's session there
			}
		}
	case *pb.LeaseRevokeRequest:
		return r.ID
	case *pb.LeaseTimeToLiveRequest:
		return r.ID
	case *v3lockpb.LockRequest:
		return r.Lease
	case *v3electionpb.CampaignRequest:
		return r.Lease
	case *v3electionpb.ProclaimRequest:
		return r.GetLeader().GetLease()
	case *v3electionpb.ResignRequest:
		return r.GetLeader().GetLease()
	}
	return 0
}

// Bounds of forwarding: calls this gateway has in flight at others,
// per tenant and in all. Every forwarded call of this gateway to one
// peer shares one connection, on which the peer allows
// MaxStreamsPerConn streams: one tenant's waiting Locks and Campaigns
// must not take them all.
const (
	MaxForwardsPerTenant = 64
	MaxForwards          = MaxStreamsPerConn / 2
)

// forwards counts the calls in flight at other gateways, of every tenant.
var forwards atomic.Int64

// takeForward counts one more forwarded call of w's, or refuses it
// ResourceExhausted naming the bound reached; done gives it back.
func (g *Gateway) takeForward(w who) (done func(), err error) {
	tenant := tenantOf(w)
	if !g.counts.take(countForwards, tenant, MaxForwardsPerTenant) {
		return nil, errTooMany("MaxForwardsPerTenant", MaxForwardsPerTenant, "calls of one tenant in flight at other gateways")
	}
	if forwards.Add(1) > MaxForwards {
		forwards.Add(-1)
		g.counts.give(countForwards, tenant)
		return nil, errTooMany("MaxForwards", MaxForwards, "calls in flight at other gateways")
	}
	return func() { forwards.Add(-1); g.counts.give(countForwards, tenant) }, nil
}

// errPeerUnreachable answers a call about lease id whose gateway is not
// known here or cannot be reached now: the client may retry (a gateway
// just started may not be in this one's view of the directory yet).
func errPeerUnreachable(id int64) error {
	return status.Errorf(codes.Unavailable, "lockd etcd gateway: lease %x was granted by another gateway, which is not known here or cannot be reached now: retry", id)
}

// leaseNotFound reports whether err is etcd's "lease not found".
func leaseNotFound(err error) bool {
	return status.Code(err) == codes.NotFound && strings.Contains(status.Convert(err).Message(), "lease not found")
}

// forwardUnary sends a request about another gateway's lease to it
// (to each gateway with the lease's tag in turn, while they answer
// "lease not found": two proxies may share a tag).
func (g *Gateway) forwardUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	mk, ok := forwardedResponses[info.FullMethod]
	id := leaseOfRequest(req)
	if !ok || id == 0 || !foreignLease(id, g.leases.tag) || forwarded(ctx) || mutant.On(mutant.EtcdNoForward) {
		return handler(ctx, req)
	}
	w, err := g.who(ctx)
	if err != nil {
		return nil, err // this gateway relays no unauthenticated call
	}
	conns, err := g.peers.byTag(ctx, tagOf(id))
	if err != nil {
		return nil, errPeerUnreachable(id)
	}
	done, err := g.takeForward(w)
	if err != nil {
		return nil, err
	}
	defer done()
	var resp proto.Message
	err = errPeerUnreachable(id)
	for _, conn := range conns {
		if !ready(ctx, conn) {
			continue // nothing sent
		}
		resp = mk()
		if err = conn.Invoke(forwardContext(ctx), info.FullMethod, req, resp); !leaseNotFound(err) {
			break
		}
	}
	if err != nil {
		return nil, err // the peer's answer; a broken exchange is Unavailable: outcome unknown
	}
	return resp, nil
}

// forwarded reports whether ctx's request was forwarded by a gateway.
func forwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(forwardedKey)) > 0
}

// forwardContext is ctx for a forwarded call: the caller's token (and
// nothing else of its metadata), marked forwarded.
func forwardContext(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	out := metadata.Pairs(forwardedKey, "1")
	if ts := md.Get(rpctypes.TokenFieldNameGRPC); len(ts) > 0 {
		out.Set(rpctypes.TokenFieldNameGRPC, ts[0])
	}
	return metadata.NewOutgoingContext(ctx, out)
}

// forwardKeepAlive renews another gateway's lease id there, on a stream
// of its own (each gateway with the id's tag in turn, while they answer
// TTL 0): the TTL it answers, or ok false if no gateway with the tag
// could be asked, or the caller is over its bounds (the client's next
// KeepAlive asks again; a TTL of 0 would tell it the lease is gone).
func (g *Gateway) forwardKeepAlive(ctx context.Context, w who, id int64) (ttl int64, ok bool) {
	if forwarded(ctx) || mutant.On(mutant.EtcdNoForward) {
		return 0, true
	}
	conns, err := g.peers.byTag(ctx, tagOf(id))
	if err != nil {
		return 0, false
	}
	done, err := g.takeForward(w)
	if err != nil {
		return 0, false
	}
	defer done()
	for _, conn := range conns {
		if !ready(ctx, conn) {
			continue
		}
		if ttl, ok = keepAliveAt(ctx, conn, id); ttl > 0 {
			return ttl, true
		}
	}
	return ttl, ok
}

// keepAliveAt renews id at the gateway on conn, on a stream of its own.
func keepAliveAt(ctx context.Context, conn *grpc.ClientConn, id int64) (ttl int64, ok bool) {
	sctx, cancel := context.WithTimeout(forwardContext(ctx), leaseCallTimeout)
	defer cancel()
	stream, err := pb.NewLeaseClient(conn).LeaseKeepAlive(sctx)
	if err != nil {
		return 0, false
	}
	if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: id}); err != nil {
		return 0, false
	}
	resp, err := stream.Recv()
	_ = stream.CloseSend()
	if err != nil {
		return 0, false
	}
	return resp.TTL, true
}

// ownedElsewhere is a PermissionDenied refusal of a change to a node
// whose owning session this gateway does not hold: perhaps another
// gateway's lease's (orAtPeers asks them).
type ownedElsewhere struct{ st *status.Status }

func (e ownedElsewhere) Error() string              { return e.st.Err().Error() }
func (e ownedElsewhere) GRPCStatus() *status.Status { return e.st }

// elsewhere is err as ownedElsewhere when it is a lockd's forbidden
// refusal of a change to a node whose owner this gateway does not know
// (unknownOwner), else err.
func elsewhere(err error, unknownOwner bool) error {
	if !unknownOwner || (api.CodeOf(err) != api.CodeForbidden && status.Code(err) != codes.PermissionDenied) {
		return err
	}
	return ownedElsewhere{status.Convert(grpcError(err))}
}

// orAtPeers answers a request that local refuses ownedElsewhere at the
// other gateways in turn: the node is another lease's, whose session
// only the gateway that granted it holds (a concurrency.Mutex's Unlock
// is a DeleteRange of its key, an Election's Resign a Txn deleting it,
// and a client given several gateways may send them to any). A gateway
// that answers PermissionDenied (it does not hold the session either),
// or that cannot be asked, is passed over; the first other answer is
// the answer (a broken exchange: Unavailable, outcome unknown, never
// asked again elsewhere); none: local's refusal, or Unavailable if a
// gateway could not be asked (it may hold the session: retry). A refusal applied
// nothing, so asking on is safe; a forwarded request asks no further.
func orAtPeers[R proto.Message](ctx context.Context, g *Gateway, method string, req proto.Message, mk func() R, local func() (R, error)) (R, error) {
	out, err := local()
	var oe ownedElsewhere
	if !errors.As(err, &oe) || forwarded(ctx) || mutant.On(mutant.EtcdNoForward) {
		return out, err
	}
	w, werr := g.who(ctx)
	if werr != nil {
		return out, err
	}
	done, ferr := g.takeForward(w)
	if ferr != nil {
		return out, ferr
	}
	defer done()
	unasked := 0
	for _, x := range g.peers.others() {
		conn, cerr := g.peers.conn(ctx, x)
		if cerr != nil {
			continue // it serves no etcd, or its status cannot be read: nothing sent
		}
		if !ready(ctx, conn) {
			unasked++ // its gateway is down or not yet back: nothing sent
			continue
		}
		resp := mk()
		ferr := conn.Invoke(forwardContext(ctx), method, req, resp)
		if status.Code(ferr) == codes.PermissionDenied {
			continue
		}
		return resp, ferr
	}
	if unasked > 0 {
		var zero R
		return zero, status.Errorf(codes.Unavailable, "lockd etcd gateway: the key is another session's, and %d other gateways, one of which may hold it, cannot be reached now: retry", unasked)
	}
	return out, err
}
