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
