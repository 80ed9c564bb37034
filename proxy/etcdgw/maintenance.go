package etcdgw

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Maintenance (docs/etcd.md, "Cluster and Maintenance"): Status and
// AlarmList answer what etcdctl endpoint status and health need; the
// rest answers Unimplemented with what to use instead (unimplemented.go).

// EtcdVersion is the etcd version the gateway reports: the API level
// it serves (clients check it for features, not for the server).
const EtcdVersion = "3.5.0"

// Status answers for this gateway: it is its own leader (each cell has
// its own Raft leader behind it), with no database of its own (a
// nominal size of 1 byte)
// and no Raft index or term of its own (0).
func (s *maintenanceServer) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	if _, err := s.g.who(ctx); err != nil {
		return nil, err
	}
	// DbSize is nominal: a gateway has no database of its own, and
	// etcdctl 3.7 divides by it (endpoint status: "DB SIZE IN USE" as a
	// share of DB SIZE), so 0 crashes it.
	return &pb.StatusResponse{Header: s.g.plainHeader(), Version: EtcdVersion, Leader: s.g.memberID,
		DbSize: nominalDBSize, DbSizeInUse: nominalDBSize}, nil
}

// Alarm lists no alarms (there are none); activating or disarming one
// answers Unimplemented.
func (s *maintenanceServer) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	if _, err := s.g.who(ctx); err != nil {
		return nil, err
	}
	if r.Action != pb.AlarmRequest_GET {
		return s.UnimplementedMaintenanceServer.Alarm(ctx, r)
	}
	return &pb.AlarmResponse{Header: s.g.plainHeader()}, nil
}

// nominalDBSize is the database size Status reports (docs/etcd.md,
// "Cluster and Maintenance").
const nominalDBSize = 1
