package etcdgw

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Cluster (docs/etcd.md, "Cluster and Maintenance"). The members are
// lockproxies serving etcd. The directory does not record proxies' etcd
// addresses (a new field in its state machine's entries would change
// what replicas of an older build store), so a gateway lists itself
// only: a client's balancer keeps the endpoints it was given.
// MemberAdd, Remove, Update and Promote answer Unimplemented
// (unimplemented.go).

// MemberList lists this gateway.
func (s *clusterServer) MemberList(ctx context.Context, _ *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	if _, err := s.g.who(ctx); err != nil {
		return nil, err
	}
	return &pb.MemberListResponse{Header: s.g.plainHeader(), Members: []*pb.Member{s.g.member()}}, nil
}

// member is this gateway as an etcd member.
func (g *Gateway) member() *pb.Member {
	scheme := "http://"
	if g.cfg.TLS != nil {
		scheme = "https://"
	}
	return &pb.Member{ID: g.memberID, Name: g.be.Name(), ClientURLs: []string{scheme + g.Addr()}}
}
