package etcdgw

import (
	"context"
	"errors"

	"github.com/lockservice/lockd/api"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// grpcError maps an error to the gRPC status an etcd client understands
// (docs/etcd.md, "Errors"). A status passes through unchanged; an
// *api.Error becomes etcd's own error where etcd has one (its clients
// match those by message: permission denied, invalid auth token, lease
// not found), else a status of the matching code carrying the lockd
// code and message; a context's end is Canceled or DeadlineExceeded;
// anything else is an outcome the gateway does not know (a connection
// cut mid-request): Unavailable, saying so, never a known refusal.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return apiStatus(ae)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return rpctypes.ErrGRPCCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return rpctypes.ErrGRPCDeadlineExceeded
	}
	return status.Errorf(codes.Unavailable, "lockd etcd gateway: outcome unknown, the request may or may not have applied: %v", err)
}

// apiStatus maps a lockd refusal to its status.
func apiStatus(e *api.Error) error {
	switch e.Code {
	case api.CodeUnauthorized:
		return rpctypes.ErrGRPCInvalidAuthToken
	case api.CodeForbidden:
		return rpctypes.ErrGRPCPermissionDenied
	case api.CodeSessionExpired, api.CodeNoSession:
		return rpctypes.ErrGRPCLeaseNotFound
	}
	return status.Error(codeOf(e.Code), "lockd "+e.Error())
}

// codeOf is the gRPC code of a lockd code.
func codeOf(c api.Code) codes.Code {
	switch c {
	case api.CodeBadRequest, api.CodeInvalidPath, api.CodeValueTooLarge:
		return codes.InvalidArgument
	case api.CodeNoNode, api.CodeNotFound:
		return codes.NotFound
	case api.CodeNodeExists, api.CodeVersionMismatch, api.CodeNotEmpty, api.CodeConditionFailed,
		api.CodeConflict, api.CodeStaleRequest, api.CodeCodecTooOld, api.CodePermitsMismatch,
		api.CodeUpgradableTaken, api.CodeMigrationInProgress, api.CodeCopyMismatch:
		return codes.FailedPrecondition
	case api.CodeLimitExceeded, api.CodeQuotaExceeded, api.CodeTokenExhausted:
		return codes.ResourceExhausted
	case api.CodeNotLeader, api.CodeUnavailable, api.CodeWrongCell, api.CodeMoved:
		return codes.Unavailable
	case api.CodeUnauthorized:
		return codes.Unauthenticated
	case api.CodeForbidden:
		return codes.PermissionDenied
	default:
		return codes.Internal
	}
}
