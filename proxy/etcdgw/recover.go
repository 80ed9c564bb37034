package etcdgw

import (
	"context"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A handler's panic answers Internal and is logged with its stack; the
// proxy and the client's other calls go on.

// recoverUnary is the outermost unary interceptor.
func (g *Gateway) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			g.log.Error("etcd handler panicked", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, status.Errorf(codes.Internal, "lockd etcd gateway: internal error in %s (a bug; the proxy logged it)", info.FullMethod)
		}
	}()
	return handler(ctx, req)
}

// recoverStream is the outermost stream interceptor.
func (g *Gateway) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			g.log.Error("etcd stream handler panicked", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			err = status.Errorf(codes.Internal, "lockd etcd gateway: internal error in %s (a bug; the proxy logged it)", info.FullMethod)
		}
	}()
	return handler(srv, ss)
}
