package sdk

import (
	"context"
	"sync"

	"github.com/lockservice/lockd/api"
)

// reqTracker issues a session's request ids and computes acks. Ids start
// at 1 and grow; ack is the lowest id still outstanding. A new id is
// issued only while it stays within api.MaxSessionRequestWindow of the
// lowest outstanding one, so the cell still holds the result of every id a
// retry may resend.
type reqTracker struct {
	mu       sync.Mutex
	last     uint64 // last id issued
	low      uint64 // lowest outstanding id; 0 when none
	inflight map[uint64]struct{}
	wake     chan struct{} // closed (and replaced) when an id completes
}

func (t *reqTracker) init() {
	t.inflight = make(map[uint64]struct{})
	t.wake = make(chan struct{})
}

// begin issues the next id, waiting while the window is full.
func (t *reqTracker) begin(ctx context.Context) (uint64, error) {
	for {
		t.mu.Lock()
		if t.low == 0 || t.last+1-t.low < api.MaxSessionRequestWindow {
			t.last++
			id := t.last
			t.inflight[id] = struct{}{}
			if t.low == 0 {
				t.low = id
			}
			t.mu.Unlock()
			return id, nil
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return 0, &gaveUpError{api.Errorf(api.CodeUnavailable, "session request window full: %v", ctx.Err()), ctx.Err()}
		}
	}
}

// ack is the lowest outstanding id (every id below it has had its reply);
// with nothing outstanding, the next id to be issued.
func (t *reqTracker) ack() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.low == 0 {
		return t.last + 1
	}
	return t.low
}

// end marks id as having had its reply (or been given up on).
func (t *reqTracker) end(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.inflight, id)
	if id == t.low {
		if len(t.inflight) == 0 {
			t.low = 0
		} else {
			for t.low++; t.low <= t.last; t.low++ {
				if _, ok := t.inflight[t.low]; ok {
					break
				}
			}
		}
	}
	close(t.wake)
	t.wake = make(chan struct{})
}
