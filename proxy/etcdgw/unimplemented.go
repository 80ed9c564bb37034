package etcdgw

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What the gateway does not serve answers Unimplemented with what to use
// instead (docs/etcd.md, "Not supported"). The methods a service type
// does not define answer through its embedded Unimplemented type; the
// interceptor below replaces that answer's message with this table's.

// unimplementedHints maps a full method name, or a service name ending
// in "/", to its message (the method first, then its service).
var unimplementedHints = map[string]string{
	"/etcdserverpb.Auth/":                  "users and roles are not kept here: tenants, tokens and grants are managed with lockctl tenant ...; pass the tenant's API token as the password",
	"/etcdserverpb.Cluster/":               "members are lockproxies; start or stop a lockproxy with --etcd-listen",
	"/etcdserverpb.KV/Compact":             "history is not kept; nothing to compact",
	"/etcdserverpb.Maintenance/Defragment": "there is no database to defragment: cells keep their state in memory and snapshot it (lockctl status)",
	"/etcdserverpb.Maintenance/Hash":       "not kept: a cell's replicas are compared by lockd itself (lockctl status)",
	"/etcdserverpb.Maintenance/HashKV":     "not kept: a cell's replicas are compared by lockd itself (lockctl status)",
	"/etcdserverpb.Maintenance/Snapshot":   "use lockctl backup (a backup of every cell) instead",
	"/etcdserverpb.Maintenance/MoveLeader": "use lockctl transfer to move a cell's leadership",
	"/etcdserverpb.Maintenance/Downgrade":  "lockd versions are rolled by restarting lockds (docs/design/operations.md)",
	"/etcdserverpb.Maintenance/Alarm":      "there are no alarms to change (AlarmList answers none)",
	"/etcdserverpb.Maintenance/":           "not served by the lockd etcd gateway (docs/etcd.md)",
}

// hint is the message for method, or "" if the table has none.
func hint(method string) string {
	if h, ok := unimplementedHints[method]; ok {
		return h
	}
	if i := strings.LastIndexByte(method, '/'); i > 0 {
		return unimplementedHints[method[:i+1]]
	}
	return ""
}

// withHint replaces the message of an Unimplemented answer of method.
func withHint(method string, err error) error {
	if status.Code(err) != codes.Unimplemented {
		return err
	}
	if h := hint(method); h != "" && strings.HasPrefix(status.Convert(err).Message(), "method ") {
		return status.Errorf(codes.Unimplemented, "%s is not supported by the lockd etcd gateway: %s", method, h)
	}
	return err
}

func hintUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	return resp, withHint(info.FullMethod, err)
}

func hintStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return withHint(info.FullMethod, handler(srv, ss))
}
