package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// dropRelay is a TCP relay on 127.0.0.1 with one listener per replica API
// endpoint. Client→server bytes pass untouched; server→client bytes are
// framed into HTTP responses so that
//   - replica addresses in bodies (the directory, not_leader hints) become
//     relay addresses, and a client seeded with relays reaches replicas only
//     through them;
//   - the first response carrying a deleted event, JSON or binary (the waiter's event
//     for its released predecessor) is dropped: both sides are closed without
//     forwarding it, as when the cell wrote a reply its client never reads.
type dropRelay struct {
	toRelay  map[string]string // replica API address → relay address
	budget   atomic.Int64      // responses still to drop
	dropped  atomic.Int64      // responses dropped
	unframed atomic.Int64      // responses the relay could not frame (a relay bug)

	lns   []net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
}

func startDropRelay(t *testing.T, endpoints []string) *dropRelay {
	t.Helper()
	r := &dropRelay{toRelay: map[string]string{}, conns: map[net.Conn]struct{}{}}
	r.budget.Store(1)
	t.Cleanup(r.close)
	for _, ep := range endpoints {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		r.lns = append(r.lns, ln)
		r.toRelay[ep] = ln.Addr().String()
	}
	for i, ep := range endpoints {
		r.wg.Add(1)
		go r.serve(r.lns[i], ep)
	}
	return r
}

func (r *dropRelay) endpoints() []string {
	var out []string
	for _, a := range r.toRelay {
		out = append(out, a)
	}
	return out
}

func (r *dropRelay) isRelay(addr string) bool {
	for _, a := range r.toRelay {
		if a == addr {
			return true
		}
	}
	return false
}

// close stops accepting, closes every relayed connection and waits for
// every relay goroutine.
func (r *dropRelay) close() {
	r.mu.Lock()
	r.done = true
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	for _, ln := range r.lns {
		_ = ln.Close()
	}
	r.wg.Wait()
}

// track registers conns for close; false if the relay is closing.
func (r *dropRelay) track(conns ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return false
	}
	for _, c := range conns {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *dropRelay) untrack(conns ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(r.conns, c)
	}
}

func (r *dropRelay) serve(ln net.Listener, target string) {
	defer r.wg.Done()
	for i := 0; i < 100_000; i++ {
		client, err := ln.Accept()
		if err != nil {
			return // listener closed
		}
		server, err := net.DialTimeout("tcp", target, 3*time.Second)
		if err != nil {
			_ = client.Close() // the replica is down: the client sees a reset
			continue
		}
		if !r.track(client, server) {
			_ = client.Close()
			_ = server.Close()
			return
		}
		r.wg.Add(2)
		go func() {
			defer r.wg.Done()
			defer r.untrack(client, server)
			_, _ = io.Copy(server, client)
		}()
		go func() {
			defer r.wg.Done()
			defer r.untrack(client, server)
			r.responses(client, server)
		}()
	}
}

// responses relays server→client one HTTP response at a time; it returns
// (and the caller closes both sides) on error or on a dropped response.
func (r *dropRelay) responses(client, server net.Conn) {
	br := bufio.NewReader(server)
	for i := 0; i < 1_000_000; i++ {
		head, body, err := readResponse(br)
		if err != nil {
			if errors.Is(err, errUnframed) {
				r.unframed.Add(1)
			}
			return
		}
		if carriesDeleted(body) && r.budget.Add(-1) >= 0 {
			r.dropped.Add(1)
			return
		}
		for real, relay := range r.toRelay {
			body = bytes.ReplaceAll(body, []byte(`"`+real+`"`), []byte(`"`+relay+`"`))
		}
		out := append(append(head, fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))...), body...)
		if _, err := client.Write(out); err != nil {
			return
		}
	}
}

var errUnframed = errors.New("relay: response without a Content-Length frame")

// readResponse reads one HTTP/1.1 response: its status and header lines
// minus Content-Length (head, without the blank line) and its body.
func readResponse(br *bufio.Reader) (head, body []byte, err error) {
	length := 0
	for i := 0; ; i++ {
		if i > 200 {
			return nil, nil, errUnframed
		}
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, nil, err
		}
		if line == "\r\n" {
			break
		}
		k, v, _ := strings.Cut(line, ":")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "content-length":
			if length, err = strconv.Atoi(strings.TrimSpace(v)); err != nil || length < 0 || length > 64<<20 {
				return nil, nil, errUnframed
			}
			continue
		case "transfer-encoding":
			return nil, nil, errUnframed
		}
		head = append(head, line...)
	}
	body = make([]byte, length)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, nil, err
	}
	return head, body, nil
}

// TestLostKeepAliveReply: the KeepAlive reply that carries a waiter's
// deleted event for its released predecessor is lost after the cell built
// it; the waiter is still granted within a lease of the release, because
// the cell re-sends the event until a KeepAlive acknowledges it (and, as a
// second net, a waiter silent for a lease re-lists). With dequeue-on-reply
// and no re-list, the event left with the lost reply and the waiter waited
// forever.
func TestLostKeepAliveReply(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	c := cluster.Start(t, cluster.Options{Lease: lease})
	relay := startDropRelay(t, c.Endpoints())

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const lock = "/demo/lostevent/lock"
	direct := newSDK(t, c, lease)
	holder := direct.NewMutex(lock)
	must(t, holder.Lock(ctx))

	wcl, err := sdk.New(ctx, sdk.Config{Endpoints: relay.endpoints(), Lease: lease})
	must(t, err)
	t.Cleanup(func() { wcl.Close() }) // runs before the relay's cleanup
	// The waiter must reach replicas only through the relay: the directory
	// it routes by names relays (not_leader hints are rewritten the same way).
	for _, cell := range wcl.Directory().Cells {
		for _, ep := range cell.Endpoints {
			if !relay.isRelay(ep) {
				t.Fatalf("the waiter's directory names %s, not a relay: it would bypass the relay", ep)
			}
		}
	}

	waiter := wcl.NewMutex(lock)
	type result struct {
		at  time.Time
		err error
	}
	done := make(chan result, 1) // buffered: the goroutine never blocks after a Fatal
	go func() {
		err := waiter.Lock(ctx)
		done <- result{time.Now(), err}
	}()
	waitChildren(t, direct, lock, 2)
	select {
	case r := <-done:
		t.Fatalf("the waiter returned while the lock was held: %v", r.err)
	default:
	}

	released := time.Now()
	must(t, holder.Unlock(ctx))
	// Within a lease of the release, plus a margin of two leases for a
	// slow, shared machine under -race.
	bound := lease + 2*lease
	var r result
	select {
	case r = <-done:
		must(t, r.err)
	case <-time.After(bound):
		t.Fatalf("the waiter was not granted within %v of the release (responses dropped: %d)", bound, relay.dropped.Load())
	}
	if n := relay.dropped.Load(); n < 1 {
		t.Fatal("no KeepAlive reply with the deleted event was dropped: the test proved nothing")
	}
	if n := relay.unframed.Load(); n != 0 {
		t.Fatalf("the relay failed to frame %d responses", n)
	}
	if api.TokenIndex(waiter.Token()) == 0 {
		t.Fatal("granted without a fencing token")
	}
	t.Logf("granted %v after the release; %d KeepAlive reply with the deleted event dropped; %d wake-ups by event",
		r.at.Sub(released).Round(time.Millisecond), relay.dropped.Load(), waiter.Wakeups())
	must(t, waiter.Unlock(ctx))
}

// carriesDeleted reports whether a response body holds a deleted event: a
// JSON body naming it, or a binary KeepAlive reply (the SDK's default,
// api/wire.go) with one.
func carriesDeleted(body []byte) bool {
	if !api.IsWire(body) {
		return bytes.Contains(body, []byte(`"deleted"`))
	}
	var resp api.SessionResponse
	if resp.UnmarshalWire(body) != nil {
		return false
	}
	for _, ev := range resp.Events {
		if ev.Type == api.EventDeleted {
			return true
		}
	}
	return false
}
