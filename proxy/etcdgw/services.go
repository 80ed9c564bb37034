package etcdgw

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// The etcd services the gateway serves. Each is a type here, its methods
// in a file of its own (kv.go, txn.go, watch*.go, lease*.go, cluster.go,
// maintenance.go, auth.go, lock.go, election.go); a method a type does
// not define answers Unimplemented through the embedded type, and
// unimplemented.go names what to use instead.

type kvServer struct {
	pb.UnimplementedKVServer
	g *Gateway
}

type watchServer struct {
	pb.UnimplementedWatchServer
	g *Gateway
}

type leaseServer struct {
	pb.UnimplementedLeaseServer
	g *Gateway
}

type clusterServer struct {
	pb.UnimplementedClusterServer
	g *Gateway
}

type maintenanceServer struct {
	pb.UnimplementedMaintenanceServer
	g *Gateway
}

type authServer struct {
	pb.UnimplementedAuthServer
	g *Gateway
}

// register puts every service on s.
func (g *Gateway) register(s *grpc.Server) {
	pb.RegisterKVServer(s, &kvServer{g: g})
	pb.RegisterWatchServer(s, &watchServer{g: g})
	pb.RegisterLeaseServer(s, &leaseServer{g: g})
	pb.RegisterClusterServer(s, &clusterServer{g: g})
	pb.RegisterMaintenanceServer(s, &maintenanceServer{g: g})
	pb.RegisterAuthServer(s, &authServer{g: g})
	registerLockElection(s, g)
}
