package etcdgw

import (
	"context"
	"sort"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Cluster (docs/etcd.md, "Cluster and Maintenance"). The members are
// the lockproxies serving etcd: this gateway, and every other proxy of
// the directory whose status names a gateway (peers.go, at most
// MaxPeers), so a client that syncs its endpoints from MemberList
// (clientv3's AutoSyncInterval) keeps all of them. MemberAdd, Remove,
// Update and Promote answer Unimplemented (unimplemented.go).

// MemberList lists the gateways, this one first, then by name.
func (s *clusterServer) MemberList(ctx context.Context, _ *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	if _, err := s.g.who(ctx); err != nil {
		return nil, err
	}
	members := []*pb.Member{s.g.member()}
	urls := s.g.peers.all(ctx)
	names := make([]string, 0, len(urls))
	for n := range urls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		members = append(members, &pb.Member{ID: memberID(n), Name: n, ClientURLs: []string{urls[n]}})
	}
	return &pb.MemberListResponse{Header: s.g.plainHeader(), Members: members}, nil
}

// member is this gateway as an etcd member.
func (g *Gateway) member() *pb.Member {
	scheme := "http://"
	if g.cfg.TLS != nil {
		scheme = "https://"
	}
	return &pb.Member{ID: g.memberID, Name: g.be.Name(), ClientURLs: []string{scheme + g.Addr()}}
}
