package listen

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestLimitCountsUntilClose: at most Max connections are open at once,
// whoever holds them; a closed one frees its slot (once, however often it
// is closed); past the bound a plain client is answered 503.
func TestLimitCountsUntilClose(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Limit(raw, 2, true)
	defer l.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1, c2 := dial(), dial()
	defer c1.Close()
	defer c2.Close()
	s1, s2 := <-accepted, <-accepted
	c3 := dial()
	defer c3.Close()
	_ = c3.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c3)
	if !strings.HasPrefix(string(b), "HTTP/1.1 503") || l.Refused.Load() != 1 {
		t.Fatalf("third connection: %q, refused %d; want a 503", b, l.Refused.Load())
	}
	_ = s1.Close()
	_ = s1.Close() // a second close frees nothing more
	if n := l.Open(); n != 1 {
		t.Fatalf("%d open after one closed, want 1", n)
	}
	c4 := dial()
	defer c4.Close()
	select {
	case s4 := <-accepted:
		_ = s4.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot was not given to the next connection")
	}
	_ = s2.Close()
	if n := l.Open(); n != 0 {
		t.Fatalf("%d open after all closed", n)
	}
}

// TestCloseAllEndsEveryOpenConnection: CloseAll closes the connections
// still open, whoever holds them, frees their slots, and closes any
// accepted after it.
func TestCloseAllEndsEveryOpenConnection(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Limit(raw, 4, false)
	defer l.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c1, c2 := dial(), dial()
	s1, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	_ = s1.Close() // closed by its holder: not closed again
	if n := l.CloseAll(); n != 1 || l.Open() != 0 {
		t.Fatalf("CloseAll closed %d, %d open; want 1, 0", n, l.Open())
	}
	for i, c := range []net.Conn{c1, c2} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("client %d reads %v, want EOF: the server's side is closed", i+1, err)
		}
	}
	c3 := dial()
	go func() { _, _ = l.Accept() }()
	_ = c3.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c3.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a connection after CloseAll reads %v, want EOF", err)
	}
}
