// Package relay is a userspace TCP relay that delays every byte it
// carries, in both directions: the harness puts one in front of each
// replica's Raft port to make a cell whose replicas are far apart (a
// global cell, 50–150 ms round trips) on one machine, where the kernel
// has no sch_netem.
package relay

import (
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Relay accepts on a listener and forwards each connection to To,
// delaying each chunk read by a delay drawn from [Min, Max] (never
// reordering: a chunk leaves no earlier than the one before it).
type Relay struct {
	To       string
	Min, Max time.Duration

	ln     net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Listen starts a relay on addr.
func Listen(addr, to string, min, max time.Duration) (*Relay, error) {
	if min < 0 || max < min {
		return nil, errors.New("relay: want 0 <= min <= max")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Relay{To: to, Min: min, Max: max, ln: ln, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the address the relay listens on.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for them.
func (r *Relay) Close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	r.wg.Wait()
	return err
}

func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	_ = c.Close()
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.serve(in)
		}()
	}
}

func (r *Relay) serve(in net.Conn) {
	if !r.track(in) {
		_ = in.Close()
		return
	}
	defer r.untrack(in)
	out, err := net.DialTimeout("tcp", r.To, 5*time.Second)
	if err != nil {
		return
	}
	if !r.track(out) {
		_ = out.Close()
		return
	}
	defer r.untrack(out)
	done := make(chan struct{}, 2)
	go func() { r.pipe(out, in); done <- struct{}{} }()
	go func() { r.pipe(in, out); done <- struct{}{} }()
	<-done // one direction ended: end both
}

type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst, each chunk delivered at its due time.
func (r *Relay) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	q := make(chan chunk, 4096)
	go func() {
		defer close(q)
		var last time.Time
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				due := time.Now().Add(r.draw())
				if due.Before(last) {
					due = last
				}
				last = due
				q <- chunk{append([]byte(nil), buf[:n]...), due}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.b); err != nil {
			_ = src.Close() // ends the reader
			for range q {
			}
			return
		}
	}
}

func (r *Relay) draw() time.Duration {
	if r.Max == r.Min {
		return r.Min
	}
	return r.Min + rand.N(r.Max-r.Min+1)
}
