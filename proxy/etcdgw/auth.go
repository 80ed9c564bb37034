package etcdgw

import (
	"context"

	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Auth. The etcd auth token a client sends in gRPC metadata ("token",
// what etcd clients send after Auth.Authenticate) IS the tenant's API
// token: Authenticate takes the API token as the password (any user
// name) and answers it back as the token. Every call forwards it to
// the proxy, so the lockds authorize etcd clients exactly as SDK
// clients. Nothing about a token is cached here: the proxy's Authorize
// is cheap and follows revocations (docs/etcd.md, "Auth").

// who is the sender of a call: its API token ("" without one) and the
// proxy's view of it.
type who struct {
	token  string
	caller Caller
}

// errNeedToken answers a call without a token where tokens are required.
var errNeedToken = status.Error(codes.Unauthenticated,
	"etcdserver: user name is empty: this cluster requires an API token: etcdctl --user anything:TOKEN or the client's Username/Password")

// who authenticates the sender of the call ctx carries.
func (g *Gateway) who(ctx context.Context) (who, error) {
	tok, err := tokenOf(ctx)
	if err != nil {
		return who{}, err
	}
	if tok == "" && g.cfg.AuthRequired {
		return who{}, errNeedToken
	}
	c, err := g.be.Authorize(ctx, tok)
	if err != nil {
		return who{}, grpcError(err)
	}
	return who{token: tok, caller: c}, nil
}

// tokenOf reads the etcd token from ctx's metadata ("" without one).
func tokenOf(ctx context.Context) (string, error) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return "", nil
	}
	ts := md.Get(rpctypes.TokenFieldNameGRPC)
	if len(ts) == 0 || ts[0] == "" {
		return "", nil
	}
	if len(ts[0]) > MaxTokenBytes {
		return "", rpctypes.ErrGRPCInvalidAuthToken
	}
	return ts[0], nil
}

// Authenticate checks the API token given as the password (the user
// name is not looked at) and answers it back as the etcd token.
func (s *authServer) Authenticate(ctx context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	if r.Password == "" || len(r.Password) > MaxTokenBytes {
		return nil, rpctypes.ErrGRPCAuthFailed
	}
	if _, err := s.g.be.Authorize(ctx, r.Password); err != nil {
		if api.CodeOf(err) == api.CodeUnauthorized {
			return nil, rpctypes.ErrGRPCAuthFailed
		}
		return nil, grpcError(err)
	}
	return &pb.AuthenticateResponse{Header: s.g.plainHeader(), Token: r.Password}, nil
}

// AuthStatus: auth is enabled when the cluster requires tokens.
func (s *authServer) AuthStatus(ctx context.Context, _ *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return &pb.AuthStatusResponse{Header: s.g.plainHeader(), Enabled: s.g.cfg.AuthRequired}, nil
}
