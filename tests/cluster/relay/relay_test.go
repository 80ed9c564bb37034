package relay

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// TestRelayCarriesBytesInOrder: everything sent through a delaying relay
// to an echo server comes back whole and in order.
func TestRelayCarriesBytesInOrder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	r, err := Listen("127.0.0.1:0", ln.Addr().String(), time.Millisecond, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := make([]byte, 1<<20)
	for i := range want {
		want[i] = byte(rand.N(256))
	}
	go func() {
		for off := 0; off < len(want); {
			n := min(len(want)-off, 1+rand.N(8192))
			if _, err := c.Write(want[off : off+n]); err != nil {
				return
			}
			off += n
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes came back changed or out of order")
	}
}
