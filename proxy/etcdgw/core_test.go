package etcdgw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestGRPCError(t *testing.T) {
	cases := []struct {
		err  error
		code codes.Code
		same error // etcd's own error, matched by clients on its message
	}{
		{nil, codes.OK, nil},
		{api.Errorf(api.CodeForbidden, "x"), codes.PermissionDenied, rpctypes.ErrGRPCPermissionDenied},
		{api.Errorf(api.CodeUnauthorized, "x"), codes.Unauthenticated, rpctypes.ErrGRPCInvalidAuthToken},
		{api.Errorf(api.CodeSessionExpired, "x"), codes.NotFound, rpctypes.ErrGRPCLeaseNotFound},
		{api.Errorf(api.CodeInvalidPath, "x"), codes.InvalidArgument, nil},
		{api.Errorf(api.CodeQuotaExceeded, "x"), codes.ResourceExhausted, nil},
		{api.Errorf(api.CodeNotLeader, "x"), codes.Unavailable, nil},
		{api.Errorf(api.CodeVersionMismatch, "x"), codes.FailedPrecondition, nil},
		{fmt.Errorf("wrapped: %w", api.Errorf(api.CodeNotEmpty, "x")), codes.FailedPrecondition, nil},
		{context.Canceled, codes.Canceled, nil},
		{context.DeadlineExceeded, codes.DeadlineExceeded, nil},
		{errors.New("connection reset"), codes.Unavailable, nil},
		{status.Error(codes.Aborted, "as is"), codes.Aborted, nil},
	}
	for _, c := range cases {
		got := grpcError(c.err)
		if status.Code(got) != c.code {
			t.Errorf("grpcError(%v) = %v, want %v", c.err, got, c.code)
		}
		if c.same != nil && got != c.same {
			t.Errorf("grpcError(%v) = %v, want etcd's %v", c.err, got, c.same)
		}
	}
	// An unknown outcome never reads as a known refusal.
	if msg := status.Convert(grpcError(errors.New("eof"))).Message(); api.CodeOf(errors.New(msg)) != "" {
		t.Errorf("unknown outcome reads as a refusal: %s", msg)
	}
}

func TestCondOf(t *testing.T) {
	cases := []struct {
		name  string
		cmp   clientv3.Cmp
		owner uint64
		want  api.TxnCond
		code  codes.Code
	}{
		{"create = 0 is a compare (a container is missing)", clientv3.Compare(clientv3.CreateRevision("k"), "=", 0), 0, api.TxnCond{If: api.CondCreateRev, Path: "/p", Cmp: api.CmpEqual}, codes.OK},
		{"create > r", clientv3.Compare(clientv3.CreateRevision("k"), ">", 77), 0, api.TxnCond{If: api.CondCreateRev, Path: "/p", Cmp: api.CmpGreater, Rev: 77}, codes.OK},
		{"mod < r", clientv3.Compare(clientv3.ModRevision("k"), "<", 5), 0, api.TxnCond{If: api.CondModRev, Path: "/p", Cmp: api.CmpLess, Rev: 5}, codes.OK},
		{"version !=", clientv3.Compare(clientv3.Version("k"), "!=", 3), 0, api.TxnCond{If: api.CondVersionCmp, Path: "/p", Cmp: api.CmpNotEqual, Version: 3}, codes.OK},
		{"value =", clientv3.Compare(clientv3.Value("k"), "=", "v"), 0, api.TxnCond{If: api.CondValue, Path: "/p", Cmp: api.CmpEqual, Value: []byte("v")}, codes.OK},
		{"lease =", clientv3.Compare(clientv3.LeaseValue("k"), "=", 9), 42, api.TxnCond{If: api.CondOwner, Path: "/p", Cmp: api.CmpEqual, Owner: 42}, codes.OK},
		{"lease <", clientv3.Compare(clientv3.LeaseValue("k"), "<", 9), 42, api.TxnCond{}, codes.Unimplemented},
	}
	for _, c := range cases {
		pc := c.cmp.GetCompare()
		got, err := condOf(pc, "/p", c.owner)
		if status.Code(err) != c.code {
			t.Errorf("%s: %v, want %v", c.name, err, c.code)
			continue
		}
		if err == nil && fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestPlanTxnRefusals(t *testing.T) {
	g := &Gateway{be: newCoreBackend()}
	g.keys, _ = newKeyspace("/etcd", g.be)
	put := func(k string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k)}}}
	}
	get := func(k string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte(k)}}}
	}
	del := func(k, end string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(k), RangeEnd: []byte(end)}}}
	}
	nested := &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{}}}
	cases := []struct {
		name string
		r    *pb.TxnRequest
		code codes.Code
	}{
		{"plain", &pb.TxnRequest{Success: []*pb.RequestOp{put("a"), get("b")}, Failure: []*pb.RequestOp{get("a")}}, codes.OK},
		{"two cells", &pb.TxnRequest{Success: []*pb.RequestOp{put("a"), put("/demo/b")}}, codes.FailedPrecondition},
		{"two cells by a read", &pb.TxnRequest{Success: []*pb.RequestOp{put("a")}, Failure: []*pb.RequestOp{get("/demo/b")}}, codes.FailedPrecondition},
		{"else writes", &pb.TxnRequest{Success: []*pb.RequestOp{put("a")}, Failure: []*pb.RequestOp{put("b")}}, codes.Unimplemented},
		{"nested", &pb.TxnRequest{Success: []*pb.RequestOp{nested}}, codes.Unimplemented},
		{"range delete", &pb.TxnRequest{Success: []*pb.RequestOp{del("a", "b")}}, codes.Unimplemented},
		{"duplicate key", &pb.TxnRequest{Success: []*pb.RequestOp{put("a"), del("a", "")}}, codes.InvalidArgument},
		{"range compare", &pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("a"), RangeEnd: []byte("b")}}}, codes.Unimplemented},
		{"empty", &pb.TxnRequest{}, codes.OK},
	}
	for _, c := range cases {
		if _, err := g.planTxn(c.r); status.Code(err) != c.code {
			t.Errorf("%s: %v, want %v", c.name, err, c.code)
		}
	}
}

func TestPlanRangeAndSort(t *testing.T) {
	plans := []struct {
		name  string
		r     *pb.RangeRequest
		whole bool
		order pb.RangeRequest_SortOrder
	}{
		{"plain", &pb.RangeRequest{Limit: 5}, false, pb.RangeRequest_NONE},
		{"key ascending is the natural order", &pb.RangeRequest{SortOrder: pb.RangeRequest_ASCEND}, false, pb.RangeRequest_NONE},
		{"key descending", &pb.RangeRequest{SortOrder: pb.RangeRequest_DESCEND}, true, pb.RangeRequest_DESCEND},
		{"target without order ascends", &pb.RangeRequest{SortTarget: pb.RangeRequest_CREATE}, true, pb.RangeRequest_ASCEND},
		{"filter", &pb.RangeRequest{MaxCreateRevision: 9}, true, pb.RangeRequest_NONE},
	}
	for _, c := range plans {
		p := planRange(c.r)
		if p.whole != c.whole || p.order != c.order {
			t.Errorf("%s: %+v", c.name, p)
		}
	}
	kvs := []*mvccpb.KeyValue{
		{Key: []byte("a"), CreateRevision: 3, ModRevision: 9, Version: 2, Value: []byte("z")},
		{Key: []byte("b"), CreateRevision: 1, ModRevision: 5, Version: 1, Value: []byte("y")},
		{Key: []byte("c"), CreateRevision: 2, ModRevision: 7, Version: 3, Value: []byte("x")},
	}
	keys := func(kvs []*mvccpb.KeyValue) (s string) {
		for _, kv := range kvs {
			s += string(kv.Key)
		}
		return s
	}
	sorts := []struct {
		order  pb.RangeRequest_SortOrder
		target pb.RangeRequest_SortTarget
		want   string
	}{
		{pb.RangeRequest_ASCEND, pb.RangeRequest_CREATE, "bca"},
		{pb.RangeRequest_DESCEND, pb.RangeRequest_MOD, "acb"},
		{pb.RangeRequest_ASCEND, pb.RangeRequest_VALUE, "cba"},
		{pb.RangeRequest_DESCEND, pb.RangeRequest_VERSION, "cab"},
		{pb.RangeRequest_DESCEND, pb.RangeRequest_KEY, "cba"},
	}
	for _, c := range sorts {
		cp := append([]*mvccpb.KeyValue(nil), kvs...)
		sortKVs(cp, c.order, c.target)
		if got := keys(cp); got != c.want {
			t.Errorf("sort %v by %v = %s, want %s", c.order, c.target, got, c.want)
		}
	}
	f := filterKVs(append([]*mvccpb.KeyValue(nil), kvs...), &pb.RangeRequest{MinModRevision: 6, MaxCreateRevision: 2})
	if keys(f) != "c" {
		t.Errorf("filter = %s, want c", keys(f))
	}
	if checkRevision(rev(1, 10), 1, 10) != nil || checkRevision(rev(1, 9), 1, 10) != rpctypes.ErrGRPCCompacted ||
		checkRevision(rev(1, 11), 1, 10) != rpctypes.ErrGRPCFutureRev || checkRevision(0, 1, 10) != nil {
		t.Error("checkRevision: past reads not refused as documented")
	}
}

func TestWhoAndAuthenticate(t *testing.T) {
	for _, required := range []bool{false, true} {
		g := &Gateway{be: newCoreBackend(), cfg: Config{AuthRequired: required}}
		bare := context.Background()
		_, err := g.who(bare)
		if required && status.Code(err) != codes.Unauthenticated || !required && err != nil {
			t.Errorf("required %v, no token: %v", required, err)
		}
		with := func(tok string) context.Context {
			return metadata.NewIncomingContext(bare, metadata.Pairs(rpctypes.TokenFieldNameGRPC, tok))
		}
		w, err := g.who(with("t1"))
		if err != nil || w.token != "t1" || w.caller.Tenant() != "t1" {
			t.Errorf("required %v, token t1: %+v %v", required, w, err)
		}
		if _, err := g.who(with("bogus")); err != rpctypes.ErrGRPCInvalidAuthToken {
			t.Errorf("required %v, bogus token: %v", required, err)
		}
		as := &authServer{g: g}
		if r, err := as.Authenticate(bare, &pb.AuthenticateRequest{Name: "x", Password: "t1"}); err != nil || r.Token != "t1" {
			t.Errorf("Authenticate(t1): %v %v", r, err)
		}
		if _, err := as.Authenticate(bare, &pb.AuthenticateRequest{Name: "x", Password: "bogus"}); err != rpctypes.ErrGRPCAuthFailed {
			t.Errorf("Authenticate(bogus): %v", err)
		}
		if st, _ := as.AuthStatus(bare, &pb.AuthStatusRequest{}); st.Enabled != required {
			t.Errorf("AuthStatus enabled %v, want %v", st.Enabled, required)
		}
	}
}

func TestRecoverAnswersInternal(t *testing.T) {
	g := &Gateway{log: slog.New(slog.DiscardHandler)}
	info := &grpc.UnaryServerInfo{FullMethod: "/etcdserverpb.KV/Range"}
	_, err := g.recoverUnary(context.Background(), nil, info, func(context.Context, any) (any, error) { panic("boom") })
	if status.Code(err) != codes.Internal {
		t.Fatalf("a panicking handler: %v, want Internal", err)
	}
	serr := g.recoverStream(nil, nil, &grpc.StreamServerInfo{FullMethod: "/etcdserverpb.Watch/Watch"}, func(any, grpc.ServerStream) error { panic("boom") })
	if status.Code(serr) != codes.Internal {
		t.Fatalf("a panicking stream: %v, want Internal", serr)
	}
	// An error a handler forgot to map is a status, never Unknown.
	if _, err := mapUnaryErrors(context.Background(), nil, info, func(context.Context, any) (any, error) {
		return nil, api.Errorf(api.CodeInvalidPath, "x")
	}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("unmapped error: %v", err)
	}
	for _, m := range []string{"/etcdserverpb.Auth/UserAdd", "/etcdserverpb.Maintenance/Snapshot", "/etcdserverpb.Cluster/MemberRemove"} {
		err := withHint(m, status.Errorf(codes.Unimplemented, "method %s not implemented", m))
		if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "lockd etcd gateway: ") {
			t.Errorf("%s: %v", m, err)
		}
	}
}
