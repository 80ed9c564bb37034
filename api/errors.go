package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable, machine-readable error code. Clients match on it; the
// message beside it is for humans and may change.
type Code string

const (
	CodeNotLeader       Code = "not_leader"       // this replica does not lead the cell; Leader names the one that does, if known
	CodeSessionExpired  Code = "session_expired"  // the session existed and has ended (expired or closed)
	CodeNoSession       Code = "no_session"       // the request needs a session and names none, or one the cell never had
	CodeNodeExists      Code = "node_exists"      // create of a path that exists
	CodeNoNode          Code = "no_node"          // the path (or a parent it needs) does not exist
	CodeVersionMismatch Code = "version_mismatch" // compare-and-set on a version that is not the current one
	CodeNotEmpty        Code = "not_empty"        // delete of a node that has children
	CodeValueTooLarge   Code = "value_too_large"  // value over MaxValueSize
	CodeInvalidPath     Code = "invalid_path"     // path breaks the path rules
	CodeWrongCell       Code = "wrong_cell"       // no cell here serves the path's prefix
	CodeMoved           Code = "moved"            // the prefix moved (or is moving) to another cell, named in Cell; nothing was applied
	CodeNotFound        Code = "not_found"        // an admin request names a cell, prefix or lockd the directory does not have
	CodeConflict        Code = "conflict"         // an admin request conflicts with the directory's state (a migration in flight, a placement rule); nothing changed
	CodeBadRequest      Code = "bad_request"      // malformed request
	CodeStaleRequest    Code = "stale_request"    // a request id older than the session's retained window
	CodeUnavailable     Code = "unavailable"      // no quorum or timed out; the outcome is unknown, retry with the same request id
	CodeUnauthorized    Code = "unauthorized"     // missing or rejected auth token
	CodeTokenExhausted  Code = "token_exhausted"  // the cell's fencing-token space is used up (see MaxTokenIndex, MaxTokenEpoch); permanent
	CodeLimitExceeded   Code = "limit_exceeded"   // a named limit (api/limits.go) would be exceeded; nothing was applied
	CodeQuotaExceeded   Code = "quota_exceeded"   // the tenant's quota (sessions, nodes, bytes, watches, writes/s) would be exceeded; nothing was applied
	CodeForbidden       Code = "forbidden"        // the token's tenant lacks the role on the path, or the node is another session's
	CodeInternal        Code = "internal"         // a bug; please report
	// CodeMigrationInProgress: another driver (another lockctl migrate)
	// drives the prefix's migration, or took it over from this one;
	// nothing changed. Wait for it, or take over explicitly
	// (lockctl migrate PREFIX --to CELL --take-over) if it is gone.
	CodeMigrationInProgress Code = "migration_in_progress"
	// CodeCopyMismatch: a migration's commit was refused because the new
	// cell's copy of the prefix differs from the old cell's sealed source
	// (node count or digest); nothing changed. Run the migration again.
	CodeCopyMismatch Code = "copy_mismatch"
	// CodeCodecTooOld: a lockd registering with the directory decodes only
	// log codecs below the cluster's floor (DirectoryResponse.LogCodec):
	// it could not read the entries its cells' logs hold. Upgrade it.
	CodeCodecTooOld Code = "codec_too_old"
)

// HTTPStatus is the status the server answers a code with.
func (c Code) HTTPStatus() int {
	switch c {
	case CodeBadRequest, CodeInvalidPath:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeNoNode, CodeNoSession:
		return http.StatusNotFound
	case CodeNodeExists, CodeVersionMismatch, CodeNotEmpty, CodeStaleRequest:
		return http.StatusConflict
	case CodeSessionExpired:
		return http.StatusGone
	case CodeTokenExhausted:
		return http.StatusInsufficientStorage
	case CodeLimitExceeded, CodeQuotaExceeded:
		return http.StatusTooManyRequests
	case CodeForbidden:
		return http.StatusForbidden
	case CodeValueTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeWrongCell, CodeMoved:
		return http.StatusMisdirectedRequest
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict, CodeMigrationInProgress, CodeCopyMismatch, CodeCodecTooOld:
		return http.StatusConflict
	case CodePermitsMismatch:
		return http.StatusConflict
	case CodeUpgradableTaken:
		return http.StatusConflict
	case CodeConditionFailed: // txn_types.go: inside a /v1/txn answer; 412 if ever sent alone
		return http.StatusPreconditionFailed
	case CodeNotLeader, CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// Error is the error body of every failed request, and the error type the SDK
// returns. errors.Is matches two Errors by Code alone, so
// errors.Is(err, api.ErrNoNode) works on any wrapped *Error.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message,omitempty"`
	// Leader is the API address of the cell's leader, set with not_leader when known.
	Leader string `json:"leader,omitempty"`
	// Elected is set with not_leader when Leader was elected while the
	// request waited for a usable leader (a newer Raft term): a client
	// that could not reach that address before (Lockd-Unreachable) should
	// try it again, a process restarted there.
	Elected bool `json:"leader_elected,omitempty"`
	// Cell names the cell a prefix moved to, set with moved.
	Cell string `json:"cell,omitempty"`
	// NotApplied is set with unavailable when the service knows the
	// request had no effect: the cell's state refused it outright (its
	// prefix is still being taken up, or a copy is arriving). A write so
	// refused is safe to send again; without it an unavailable write's
	// outcome is unknown.
	NotApplied bool `json:"not_applied,omitempty"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err if it is (or wraps) an *Error, else "".
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Sentinels for errors.Is.
var (
	ErrNotLeader       = &Error{Code: CodeNotLeader}
	ErrSessionExpired  = &Error{Code: CodeSessionExpired}
	ErrNoSession       = &Error{Code: CodeNoSession}
	ErrNodeExists      = &Error{Code: CodeNodeExists}
	ErrNoNode          = &Error{Code: CodeNoNode}
	ErrVersionMismatch = &Error{Code: CodeVersionMismatch}
	ErrNotEmpty        = &Error{Code: CodeNotEmpty}
	ErrValueTooLarge   = &Error{Code: CodeValueTooLarge}
	ErrInvalidPath     = &Error{Code: CodeInvalidPath}
	ErrWrongCell       = &Error{Code: CodeWrongCell}
	ErrMoved           = &Error{Code: CodeMoved}
	ErrNotFound        = &Error{Code: CodeNotFound}
	ErrConflict        = &Error{Code: CodeConflict}
	ErrBadRequest      = &Error{Code: CodeBadRequest}
	ErrStaleRequest    = &Error{Code: CodeStaleRequest}
	ErrUnavailable     = &Error{Code: CodeUnavailable}
	ErrUnauthorized    = &Error{Code: CodeUnauthorized}
	ErrTokenExhausted  = &Error{Code: CodeTokenExhausted}
	ErrLimitExceeded   = &Error{Code: CodeLimitExceeded}
	ErrQuotaExceeded   = &Error{Code: CodeQuotaExceeded}
	ErrForbidden       = &Error{Code: CodeForbidden}
	ErrInternal        = &Error{Code: CodeInternal}
)

// AsError returns err as an *Error: itself if it is (or wraps) one, else
// an internal error carrying its text.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}
