//go:build unix && !aix

package sdk

import (
	"errors"
	"syscall"
)

// peerGone reports whether the peer of an idle pooled connection has
// already ended it: a non-blocking peek at the socket finds the end of the
// stream, a reset, or bytes nobody asked for (a TLS close_notify; a
// server's last word before it closed). "Nothing to read yet", and any
// error that says nothing about the peer, mean the connection may still
// carry a request. Go's net/http learns the same from a reader goroutine
// per connection; fasthttp has none, and would send the request into the
// dead connection and report it lost with its outcome unknown.
//
// The peek runs under Control, not Read: RawConn.Read refuses at once,
// without calling its function, when the connection's read deadline has
// passed, and fasthttp leaves the last request's deadline on a pooled
// connection, so every connection idle past its last timeout would look
// closed. The socket is non-blocking either way (MSG_DONTWAIT).
func peerGone(rc syscall.RawConn) bool {
	gone := false
	var buf [1]byte
	err := rc.Control(func(fd uintptr) {
		for range maxPeekTries {
			_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EINTR {
				continue
			}
			gone = err == nil || peerEnded(err)
			return
		}
		// Interrupted throughout: assume alive, as without the check.
	})
	return gone || err != nil // err: the connection is closed here already
}

// peerEnded reports whether a peek's error says the peer ended the
// connection (or the path to it is gone).
func peerEnded(err error) bool {
	for _, e := range []syscall.Errno{syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// maxPeekTries bounds peerGone's retries of a peek a signal interrupted.
const maxPeekTries = 4
