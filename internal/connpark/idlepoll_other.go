//go:build !linux

package connpark

import (
	"errors"
	"net"
	"time"
)

// idlePoller is Linux's (idlepoll_linux.go): elsewhere an idle
// connection stays with fasthttp.
type idlePoller struct{}

func newIdlePoller(time.Duration, int, func(net.Conn, time.Duration)) (*idlePoller, error) {
	return nil, errors.New("idle connections are parked only on Linux")
}

func (*idlePoller) add(net.Conn) bool { return false }
func (*idlePoller) held() int         { return 0 }
func (*idlePoller) parks() uint64     { return 0 }
func (*idlePoller) close()            {}
