package etcdgw

import (
	"context"

	"google.golang.org/grpc"
)

// The interceptor chains, outermost first: recover a handler's panic
// (recover.go), then make sure whatever a handler returns is a gRPC
// status (grpcError: an error a handler forgot to map never reaches a
// client as codes.Unknown), and give an Unimplemented answer its hint
// (unimplemented.go); innermost, a request about another gateway's
// lease goes to that gateway (forward.go).

func (g *Gateway) unaryInterceptors() []grpc.UnaryServerInterceptor {
	return []grpc.UnaryServerInterceptor{g.recoverUnary, hintUnary, mapUnaryErrors, g.forwardUnary}
}

func (g *Gateway) streamInterceptors() []grpc.StreamServerInterceptor {
	return []grpc.StreamServerInterceptor{g.recoverStream, hintStream, mapStreamErrors}
}

func mapUnaryErrors(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		return nil, grpcError(err)
	}
	return resp, nil
}

func mapStreamErrors(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return grpcError(handler(srv, ss))
}
