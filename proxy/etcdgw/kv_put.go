package etcdgw

import (
	"context"
	"errors"

	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// KV.Put (docs/etcd.md, "KV"). A put with nothing to read first (no
// lease, prev_kv or ignore_*) is one /v1/node/put making the parents it
// needs as containers. Any other reads the key first and writes pinned
// to what it read (the version it saw, or "missing"), so prev_kv is the
// value the put replaced and ignore_value keeps exactly the value it
// read; if the key changed in between it reads again, at most
// MaxWriteRetries times. A key's lease is fixed when the key is created:
// a put with a lease of a key that is persistent or another lease's is
// refused FailedPrecondition (etcd would re-attach it).

// Put writes one key.
func (s *kvServer) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	w, err := s.g.who(ctx)
	if err != nil {
		return nil, err
	}
	return s.g.putAs(ctx, w, r)
}

// putAs answers r for w (also a Txn's single put, outside a txn).
func (g *Gateway) putAs(ctx context.Context, w who, r *pb.PutRequest) (*pb.PutResponse, error) {
	switch {
	case r.IgnoreValue && len(r.Value) != 0:
		return nil, rpctypes.ErrGRPCValueProvided
	case r.IgnoreLease && r.Lease != 0:
		return nil, rpctypes.ErrGRPCLeaseProvided
	}
	kp, err := g.keys.path(r.Key)
	if err != nil {
		return nil, err
	}
	if r.Lease == 0 && !r.PrevKv && !r.IgnoreValue && !r.IgnoreLease {
		var resp api.WriteResponse
		req := api.PutRequest{Path: kp.Path, Value: r.Value, MakeParents: true, Container: true, Uncontain: true}
		err := g.be.Call(ctx, w.token, api.RoutePut, req, &resp)
		if err == nil {
			return &pb.PutResponse{Header: g.header(kp.Prefix, resp.Index)}, nil
		}
		if !errors.Is(err, api.ErrForbidden) {
			return nil, grpcError(err)
		}
		// Perhaps a leased key: written with its lease's session below.
	}
	for range MaxWriteRetries {
		out, retry, err := g.putPinned(ctx, w, kp, r)
		if !retry {
			return out, grpcError(err)
		}
	}
	return nil, status.Errorf(codes.Aborted, "key %q changed under %d attempts of a put that reads it first (MaxWriteRetries): retry", truncKey(r.Key), MaxWriteRetries)
}

// putPinned reads the key and writes it pinned to what it read; retry
// says the key changed in between.
func (g *Gateway) putPinned(ctx context.Context, w who, kp keyPath, r *pb.PutRequest) (*pb.PutResponse, bool, error) {
	cur, exists, rr, err := g.readKey(ctx, w, kp)
	if err != nil {
		return nil, false, err
	}
	p := kp.Prefix
	p.Epoch = rr.Epoch
	isKey := exists && !cur.Container
	if (r.IgnoreValue || r.IgnoreLease) && !isKey {
		return nil, false, rpctypes.ErrGRPCKeyNotFound
	}
	value := r.Value
	if r.IgnoreValue {
		value = cur.Value
	}
	hdr, lease, err := g.putSession(ctx, w, p, r, &cur, isKey)
	if err != nil {
		return nil, false, err
	}
	var resp api.WriteResponse
	var werr error
	if lease != 0 && !exists {
		req := api.CreateRequest{WriteHeader: hdr, Path: kp.Path, Value: value, Ephemeral: true, MakeParents: true, Container: true}
		var cr api.CreateResponse
		werr = g.be.Call(ctx, w.token, api.RouteCreate, req, &cr)
		resp.Index = cr.Index
	} else {
		v := uint64(0)
		if exists {
			v = cur.Version
		}
		req := api.PutRequest{WriteHeader: hdr, Path: kp.Path, Value: value, Version: &v, MakeParents: true, Container: true, Uncontain: true}
		werr = g.be.Call(ctx, w.token, api.RoutePut, req, &resp)
	}
	if changedUnder(werr) {
		return nil, true, nil
	}
	if werr != nil {
		return nil, false, werr
	}
	out := &pb.PutResponse{Header: g.header(p, resp.Index)}
	if r.PrevKv && isKey {
		out.PrevKv = g.keyValue(p, kp.Rel, &cur, false)
	}
	return out, false, nil
}

// putSession is the write header a put of cur needs and the lease the
// key will have: the lease's session for a put with a lease (refused if
// the key exists and is not that lease's), the key's own lease's for
// ignore_lease or a put of another ephemeral key this credential's
// lease owns, none for a persistent key.
func (g *Gateway) putSession(ctx context.Context, w who, p PrefixInfo, r *pb.PutRequest, cur *api.Node, isKey bool) (api.WriteHeader, int64, error) {
	lease := r.Lease
	if lease == 0 && isKey && cur.Ephemeral {
		// ignore_lease, or a plain put of a leased key: the key keeps
		// its lease (etcd would detach it on a plain put).
		if lease = g.leases.leaseOf(p.Cell, cur.Owner); lease == 0 {
			return api.WriteHeader{}, 0, status.Errorf(codes.FailedPrecondition,
				"key %q belongs to a session no lease of this gateway holds: it cannot be written here", cur.Path)
		}
	}
	if lease == 0 {
		return api.WriteHeader{}, 0, nil
	}
	hdr, err := g.leases.session(ctx, w, lease, p)
	if err != nil && r.Lease == 0 && status.Code(grpcError(err)) == codes.NotFound {
		return api.WriteHeader{}, 0, status.Errorf(codes.FailedPrecondition,
			"key %q is another client's leased key: only the lease's holder writes it", cur.Path)
	}
	if err != nil {
		return api.WriteHeader{}, 0, err
	}
	switch {
	case r.Lease != 0 && cur.Path != "" && !isKey:
		return api.WriteHeader{}, 0, status.Errorf(codes.FailedPrecondition,
			"key %q has keys below it (keys are paths here): a key with a lease cannot have keys below it", cur.Path)
	case r.Lease != 0 && isKey && cur.Owner != hdr.Session:
		return api.WriteHeader{}, 0, status.Errorf(codes.FailedPrecondition,
			"key %q exists without lease %x (persistent, or another lease's): a key's lease is fixed when it is created here; delete it first (docs/etcd.md)", cur.Path, r.Lease)
	}
	return hdr, lease, nil
}

// changedUnder reports whether a pinned write was refused because the
// key changed after it was read.
func changedUnder(err error) bool {
	return errors.Is(err, api.ErrVersionMismatch) || errors.Is(err, api.ErrNodeExists) ||
		errors.Is(err, api.ErrNoNode) || errors.Is(err, api.ErrConditionFailed)
}
