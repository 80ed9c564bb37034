package etcdgw

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestConnsBounded: a connection that never handshakes is closed after
// the handshake timeout (before: it stayed open for ever, and anyone
// could take the proxy's file descriptors with such connections); the
// listener holds at most its bound open, freeing a slot as one closes,
// and a Close ends an Accept waiting for a slot.
func TestConnsBounded(t *testing.T) {
	saved := connTimes
	connTimes.handshake = 200 * time.Millisecond
	defer func() { connTimes = saved }()
	g, err := Start(context.Background(), Config{Listen: "127.0.0.1:0"}, newWFBackend())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := net.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var buf [64]byte
	for {
		_, err = c.Read(buf[:])
		if err != nil {
			break
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("a connection that never handshakes is still open after 10s")
	}

	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(raw, 1)
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for range 2 {
		d, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
	}
	first := <-accepted
	select {
	case <-accepted:
		t.Fatal("a second connection accepted past the bound of 1")
	case <-time.After(200 * time.Millisecond):
	}
	_ = first.Close()
	second := <-accepted
	if second == nil {
		t.Fatal("no slot freed by a close")
	}
	_ = ln.Close()
	if _, ok := <-accepted; ok {
		t.Fatal("accept after close")
	}
}
