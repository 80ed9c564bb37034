package sdk

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// A session write whose first attempt applied but whose reply was lost,
// and whose retry then finds the session expired, may have been applied:
// it must come back as outcome-unknown, never as a failure (or a second
// application) caused by resending it without the session.
func TestWriteAppliedThenSessionExpiredIsOutcomeUnknown(t *testing.T) {
	type lose int
	const (
		unavailableReply lose = iota // the cell says "outcome unknown"
		timeoutReply                 // the reply never comes: the attempt times out
	)
	cases := []struct {
		name  string
		route string
		lose  lose
		setup func(t *testing.T, c *Client)
		write func(t *testing.T, c *Client) error
	}{
		{"cas", api.RoutePut, unavailableReply,
			func(t *testing.T, c *Client) { mustPut(t, c, "/demo/n", "v1") },
			func(t *testing.T, c *Client) error {
				_, err := c.CompareAndSet(testCtx(t), "/demo/n", []byte("v2"), 1)
				return err
			}},
		{"put", api.RoutePut, unavailableReply, nil,
			func(t *testing.T, c *Client) error { _, err := c.Put(testCtx(t), "/demo/n", []byte("v")); return err }},
		{"create", api.RouteCreate, unavailableReply, nil,
			func(t *testing.T, c *Client) error {
				_, err := c.Create(testCtx(t), "/demo/n", []byte("v"))
				return err
			}},
		{"delete", api.RouteDelete, unavailableReply,
			func(t *testing.T, c *Client) { mustPut(t, c, "/demo/n", "v1") },
			func(t *testing.T, c *Client) error { return c.Delete(testCtx(t), "/demo/n") }},
		{"put timeout", api.RoutePut, timeoutReply, nil,
			func(t *testing.T, c *Client) error { _, err := c.Put(testCtx(t), "/demo/n", []byte("v")); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fc := newFakeCell(t, 1)
				c := newTestClient(t, fc, func(cfg *Config) { cfg.RequestTimeout = 300 * time.Millisecond })
				if tc.setup != nil {
					tc.setup(t, c)
				}
				s, err := c.Session(testCtx(t), fc.name)
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				calls := 0
				fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
					if route != tc.route {
						return next()
					}
					mu.Lock()
					calls++
					n := calls
					mu.Unlock()
					if n > 1 {
						return next()
					}
					status, resp := next() // applied under the session's request id ...
					fc.expire(s.ID())      // ... the session ends before the retry
					if tc.lose == timeoutReply {
						time.Sleep(600 * time.Millisecond) // ... and the reply is lost
						return status, resp
					}
					return fail(api.CodeUnavailable, "proposal outcome unknown")
				})
				before := len(fc.requests(tc.route))
				err = tc.write(t, c)
				defer func() {
					if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, ErrUnavailable) {
						t.Errorf("err = %v, want outcome unknown (also unavailable)", err)
					}
				}()
				for _, r := range fc.requests(tc.route)[before:] {
					if h := decode[api.WriteHeader](t, r.body); h.Session == 0 {
						t.Fatalf("the write was resent without its session: %s", r.body)
					}
				}
				// Applied exactly once.
				n, ok := fc.Node("/demo/n")
				switch tc.name {
				case "cas":
					if !ok || n.Version != 2 {
						t.Fatalf("node %+v, want version 2", n)
					}
				case "delete":
					if ok {
						t.Fatalf("node %+v still there", n)
					}
				default:
					if !ok || n.Version != 1 {
						t.Fatalf("node %+v (exists %v), want version 1", n, ok)
					}
				}
			})
		})
	}
}

// Without an earlier attempt that may have applied, a session write the
// cell refused for the session alone is resent without it, as before.
func TestWriteFallsBackWithoutSessionWhenNotApplied(t *testing.T) {
	for _, first := range []api.Code{api.CodeSessionExpired, api.CodeNotLeader} {
		t.Run(string(first), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				fc := newFakeCell(t, 2)
				c := newTestClient(t, fc, nil)
				s, err := c.Session(testCtx(t), fc.name)
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				calls := 0
				fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
					if route != api.RoutePut {
						return next()
					}
					mu.Lock()
					calls++
					n := calls
					mu.Unlock()
					if n == 1 {
						fc.expire(s.ID())
						if first == api.CodeNotLeader {
							return fail(api.CodeNotLeader, "not the leader") // definite: never applied
						}
					}
					return next()
				})
				n, err := c.Put(testCtx(t), "/demo/f", []byte("v"))
				if err != nil || n.Version != 1 {
					t.Fatalf("Put = %+v, %v; want version 1", n, err)
				}
				puts := fc.requests(api.RoutePut)
				if h := decode[api.WriteHeader](t, puts[len(puts)-1].body); h.Session != 0 {
					t.Fatalf("last attempt carried session %d", h.Session)
				}
			})
		})
	}
}

func mustPut(t *testing.T, c *Client, path, v string) {
	t.Helper()
	if _, err := c.Put(context.Background(), path, []byte(v)); err != nil {
		t.Fatal(err)
	}
}

// A session open retried after a lost reply is answered from the cell's
// nonce window with the session the first attempt opened, whose lease began
// then: the local lease clock must count from the first attempt's send,
// never from the retry's, or the client would believe in a lease the cell
// has already run down.
func TestOpenRetryCountsLeaseFromFirstSend(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, func(cfg *Config) { cfg.RequestTimeout = 300 * time.Millisecond })
		var mu sync.Mutex
		calls := 0
		const lost = 400 * time.Millisecond
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if route != api.RouteSessionOpen {
				return next()
			}
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if n == 1 {
				time.Sleep(lost) // the first attempt's reply never arrives in time
				return fail(api.CodeUnavailable, "proposal outcome unknown")
			}
			return next()
		})
		start := time.Now()
		s, err := c.Session(testCtx(t), fc.name)
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		from := s.lastConfirmedSend
		s.mu.Unlock()
		if calls < 2 {
			t.Fatalf("%d open attempts, want a retry", calls)
		}
		// The retry went out once the first attempt timed out (300 ms); the
		// first went out at once.
		if !from.Before(start.Add(150 * time.Millisecond)) {
			t.Fatalf("lease counted from %v after the call began, want from the first attempt's send", from.Sub(start))
		}
	})
}

// A write whose first attempt may have applied (its reply: unavailable)
// and whose retry meets a lockd that refuses it with wrong_cell (it no
// longer hosts the cell, and refuses without looking) may still have been
// applied: outcome unknown, not a failure the caller would take as
// "nothing happened" (the fault suite's config checker caught this).
func TestWrongCellAfterAnUnsureAttemptIsOutcomeUnknown(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, func(cfg *Config) { cfg.RequestTimeout = 300 * time.Millisecond })
		mustPut(t, c, "/demo/n", "v1")
		if _, err := c.Session(testCtx(t), fc.name); err != nil { // the write carries a request id: retried when unsure
			t.Fatal(err)
		}
		var mu sync.Mutex
		calls := 0
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if route != api.RoutePut {
				return next()
			}
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if n == 1 {
				next()                                                       // applied ...
				return fail(api.CodeUnavailable, "proposal outcome unknown") // ... reply lost
			}
			return fail(api.CodeWrongCell, "cell demo is not hosted by this lockd")
		})
		_, err := c.CompareAndSet(testCtx(t), "/demo/n", []byte("v2"), 1)
		if !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("err = %v, want outcome unknown", err)
		}
	})
}
