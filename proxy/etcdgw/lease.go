package etcdgw

import (
	"context"
	"sort"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// The Lease service (docs/etcd.md, "Lease"): Grant, Revoke, TimeToLive
// and Leases here, KeepAlive in lease_keepalive.go, the table in
// lease_table.go. Every call acts on the caller's own leases only.

// LeaseGrant grants a lease: ID 0 draws one, a chosen ID must be free
// for this credential; the TTL is clamped to [api.MinLease,
// api.MaxLease] and the granted one answered.
func (s *leaseServer) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	w, err := s.g.who(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.g.leases.grant(w, r.ID, r.TTL)
	if err != nil {
		return nil, grpcError(err)
	}
	return &pb.LeaseGrantResponse{Header: s.g.plainHeader(), ID: l.key.id, TTL: l.ttl}, nil
}

// LeaseRevoke closes every session of the lease (its keys go) and
// forgets it.
func (s *leaseServer) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	w, err := s.g.who(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.g.leases.revoke(ctx, w, r.ID); err != nil {
		return nil, grpcError(err)
	}
	return &pb.LeaseRevokeResponse{Header: s.g.plainHeader()}, nil
}

// LeaseTimeToLive answers the TTL left (what the lease's sessions are
// guaranteed), the granted TTL and, with Keys, the keys of its
// ephemeral nodes. An unknown lease answers TTL -1, as etcd does.
func (s *leaseServer) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	w, err := s.g.who(ctx)
	if err != nil {
		return nil, err
	}
	st, err := s.g.leases.status(w, r.ID)
	if err == errLeaseNotFound {
		return &pb.LeaseTimeToLiveResponse{Header: s.g.plainHeader(), ID: r.ID, TTL: -1}, nil
	}
	if err != nil {
		return nil, grpcError(err)
	}
	resp := &pb.LeaseTimeToLiveResponse{Header: s.g.plainHeader(), ID: r.ID, TTL: st.ttl, GrantedTTL: st.granted}
	if r.Keys {
		if resp.Keys, err = s.g.leaseKeys(ctx, w, st.sessions); err != nil {
			return nil, grpcError(err)
		}
	}
	return resp, nil
}

// LeaseLeases lists the caller's leases (never another credential's).
func (s *leaseServer) LeaseLeases(ctx context.Context, _ *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	w, err := s.g.who(ctx)
	if err != nil {
		return nil, err
	}
	ids := s.g.leases.list(w)
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]*pb.LeaseStatus, len(ids))
	for i, id := range ids {
		out[i] = &pb.LeaseStatus{ID: id}
	}
	return &pb.LeaseLeasesResponse{Header: s.g.plainHeader(), Leases: out}, nil
}
