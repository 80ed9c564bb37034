package sdk

import (
	"errors"

	"github.com/lockservice/lockd/api"
)

// Sentinels for errors.Is, re-exported from package api. errors.Is matches
// any *api.Error with the same code.
var (
	ErrNotLeader       = api.ErrNotLeader
	ErrSessionExpired  = api.ErrSessionExpired
	ErrNoSession       = api.ErrNoSession
	ErrNodeExists      = api.ErrNodeExists
	ErrNoNode          = api.ErrNoNode
	ErrVersionMismatch = api.ErrVersionMismatch
	ErrNotEmpty        = api.ErrNotEmpty
	ErrValueTooLarge   = api.ErrValueTooLarge
	ErrInvalidPath     = api.ErrInvalidPath
	ErrWrongCell       = api.ErrWrongCell
	ErrBadRequest      = api.ErrBadRequest
	ErrStaleRequest    = api.ErrStaleRequest
	ErrUnavailable     = api.ErrUnavailable
	ErrUnauthorized    = api.ErrUnauthorized
	ErrInternal        = api.ErrInternal
)

// ErrClosed is returned by calls on a Client (or Session) that has been
// closed. It is the one error the SDK returns that is not an *api.Error.
var ErrClosed = errors.New("sdk: client closed")

// ErrNoCluster is New's error when every endpoint refused connections for
// Config.NoClusterAfter: nothing listens at the addresses given. It also
// matches ErrUnavailable.
var ErrNoCluster = errors.New("sdk: no lockd listens at any endpoint")

// noClusterError is an unavailable *api.Error matching ErrNoCluster.
type noClusterError struct{ apiErr *api.Error }

func (e *noClusterError) Error() string   { return e.apiErr.Error() }
func (e *noClusterError) Unwrap() []error { return []error{e.apiErr, ErrNoCluster} }

// ErrOutcomeUnknown marks a write that may or may not have been applied:
// an attempt may have reached the cell and its reply was lost, and no
// later answer settled it. Such errors also match ErrUnavailable. Read the
// state before deciding to repeat the write.
var ErrOutcomeUnknown = errors.New("sdk: the write's outcome is unknown")

// outcomeUnknownError is an unavailable *api.Error for a write that may
// have been applied; errors.Is matches it to ErrOutcomeUnknown,
// ErrUnavailable and its cause (a context error), if any.
type outcomeUnknownError struct {
	apiErr *api.Error
	cause  error
}

func (e *outcomeUnknownError) Error() string { return e.apiErr.Error() }
func (e *outcomeUnknownError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.apiErr, ErrOutcomeUnknown}
	}
	return []error{e.apiErr, ErrOutcomeUnknown, e.cause}
}

// outcomeUnknown builds an outcome-unknown error.
func outcomeUnknown(cause error, format string, args ...any) error {
	e := api.Errorf(api.CodeUnavailable, format, args...)
	e.Message += "; the outcome is unknown"
	return &outcomeUnknownError{apiErr: e, cause: cause}
}

// gaveUpError is what the retry loop returns when the context ends before
// a call succeeded. It is an unavailable *api.Error (the outcome is
// unknown) that also wraps the context's error, so both
// errors.Is(err, ErrUnavailable) and errors.Is(err, context.DeadlineExceeded)
// hold.
type gaveUpError struct {
	apiErr *api.Error
	ctxErr error
}

func (e *gaveUpError) Error() string   { return e.apiErr.Error() }
func (e *gaveUpError) Unwrap() []error { return []error{e.apiErr, e.ctxErr} }

// sessionGone reports whether err says the session no longer exists.
func sessionGone(err error) bool {
	switch api.CodeOf(err) {
	case api.CodeSessionExpired, api.CodeNoSession:
		return true
	}
	return false
}

// nodeMovedAway reports whether the session's own cell answered that the
// path's prefix moved away from it (sealed for a move, or moved). Only a
// seal makes a cell answer so, and a seal deletes, in its own entry, the
// prefix's ephemeral nodes: a lock node of this session that gets this
// answer is gone, whether or not its deletion event arrived (one queued on
// a leader that then failed is re-fired only by a watch re-arm, which the
// same seal refuses).
func nodeMovedAway(err error) bool { return api.CodeOf(err) == api.CodeMoved }

// Codes of the recipes' own errors (never sent by the cell).
const (
	codeLockTimeout api.Code = "lock_timeout"
	codeLockLost    api.Code = "lock_lost"
	codeNotHeld     api.Code = "not_held"
	codeNoLeader    api.Code = "no_leader"
)

// Errors of the lock, election and membership recipes. They are *api.Error
// values with codes of their own, so errors.Is matches any error the
// recipes return with the same code (which may also wrap the cause, such
// as ErrSessionExpired).
var (
	// ErrLockTimeout: TryLock did not get the lock within its timeout. It
	// left no node behind.
	ErrLockTimeout = &api.Error{Code: codeLockTimeout, Message: "lock not acquired in time"}
	// ErrLockLost: the lock's node or its session is gone (expired, closed,
	// or the node deleted by anyone), so the lock is not held.
	ErrLockLost = &api.Error{Code: codeLockLost, Message: "lock lost: its node or session is gone"}
	// ErrNotHeld: Unlock, Resign, Proclaim or Leave of something not held.
	// After a loss, Unlock and Resign return an error matching both
	// ErrNotHeld and ErrLockLost.
	ErrNotHeld = &api.Error{Code: codeNotHeld, Message: "not held"}
	// ErrNoLeader: nobody leads the election.
	ErrNoLeader = &api.Error{Code: codeNoLeader, Message: "no leader"}
)

// recipeError is a recipe's *api.Error with its cause: errors.Is matches
// both.
type recipeError struct {
	apiErr *api.Error
	cause  error
}

func (e *recipeError) Error() string {
	if e.cause == nil {
		return e.apiErr.Error()
	}
	return e.apiErr.Error() + ": " + e.cause.Error()
}

func (e *recipeError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.apiErr}
	}
	return []error{e.apiErr, e.cause}
}

func recipeErr(code api.Code, cause error, format string, args ...any) error {
	return &recipeError{apiErr: api.Errorf(code, format, args...), cause: cause}
}
