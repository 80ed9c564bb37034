package etcdgw

import (
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"google.golang.org/grpc"
)

// registerLockElection puts the v3lock and v3election services on s
// (lock.go, election.go).
func registerLockElection(s *grpc.Server, g *Gateway) {
	v3lockpb.RegisterLockServer(s, &lockServer{g: g})
	v3electionpb.RegisterElectionServer(s, &electionServer{g: g})
}
