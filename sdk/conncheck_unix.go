//go:build unix

package sdk

import "syscall"

// peerGone reports whether the peer of an idle pooled connection has
// already ended it: a non-blocking peek at the socket finds the end of the
// stream, a reset, or bytes nobody asked for (a TLS close_notify; a
// server's last word before it closed). Only "nothing to read yet" means
// the connection may still carry a request. Go's net/http learns the same
// from a reader goroutine per connection; fasthttp has none, and would
// send the request into the dead connection and report it lost with its
// outcome unknown.
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
			gone = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
			return
		}
		// Interrupted throughout: assume alive, as without the check.
	})
	return gone || err != nil
}

// maxPeekTries bounds peerGone's retries of a peek a signal interrupted.
const maxPeekTries = 4
