package api

import (
	"fmt"
	"strconv"
)

// HeaderDirectoryIndex carries the index of the directory view a client
// routed a cell request by (the SDK sends it with every request naming a
// cell). A lockd or lockproxy whose own view lacks the named cell answers
// wrong_cell only when its view is at least as new as the client's; when
// the client has seen a later directory (a cell created a moment ago that
// this server's view has not caught up with), it answers unavailable and
// not_applied instead, and the client sends again.
const HeaderDirectoryIndex = "Lockd-Directory-Index"

// maxDirectoryIndexHeader bounds the header's value: a uint64's decimal
// digits.
const maxDirectoryIndexHeader = 20

// ParseDirectoryIndex reads a HeaderDirectoryIndex value: 0 for none, a
// bad_request for a malformed one.
func ParseDirectoryIndex(header []byte) (uint64, error) {
	if len(header) == 0 {
		return 0, nil
	}
	if len(header) > maxDirectoryIndexHeader {
		return 0, Errorf(CodeBadRequest, "%s: over %d digits", HeaderDirectoryIndex, maxDirectoryIndexHeader)
	}
	idx, err := strconv.ParseUint(string(header), 10, 64)
	if err != nil {
		return 0, Errorf(CodeBadRequest, "%s %q: not a directory index", HeaderDirectoryIndex, header)
	}
	return idx, nil
}

// ViewBehindError is the refusal of a request naming what (a cell, a
// path's cell) that a server whose view of the directory (at index view)
// is behind the client's does not know yet: nothing was applied, and the
// client should send again.
func ViewBehindError(who, what string, view, client uint64) *Error {
	return &Error{Code: CodeUnavailable, NotApplied: true,
		Message: fmt.Sprintf("%s is not in this %s's view of the directory (index %d), which is behind the client's (index %d); send again", what, who, view, client)}
}
