package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
)

// refresher reads the directory for requests that name what this lockd's
// view lacks (an unknown token or cell, a prefix not served yet). However
// many such requests arrive, at most one read runs at a time, and reads
// start at least api.DirectoryRefreshGap apart: a flood of made-up tokens
// costs the directory group one read per gap, not one per request. A
// caller waits for a read that started after it asked, so a token made
// on another lockd a moment before is found.
type refresher struct {
	read func(ctx context.Context)
	gap  time.Duration // between reads' starts: api.DirectoryRefreshGap

	mu      sync.Mutex
	next    chan struct{} // closed when the read collecting callers now ends
	running bool
	last    time.Time // when the last read started
}

// refresh waits, up to ctx, for a directory read that starts after now.
func (r *refresher) refresh(ctx context.Context) {
	r.mu.Lock()
	if r.next == nil {
		r.next = make(chan struct{})
	}
	done := r.next
	if !r.running {
		r.running = true
		go r.loop()
	}
	r.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// loop runs reads while callers wait for one, then ends.
func (r *refresher) loop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.next != nil {
		wait := r.gap - time.Since(r.last)
		if wait > 0 && !mutant.On(mutant.RefreshGap) {
			r.mu.Unlock()
			time.Sleep(wait)
			r.mu.Lock()
		}
		// Everyone who asked by now is served by this read.
		done := r.next
		r.next, r.last = nil, time.Now()
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
		r.read(ctx)
		cancel()
		close(done)
		r.mu.Lock()
	}
	r.running = false
}

// refreshReads bounds the directory reads one request waits for when its
// token or cell is unknown (within unknownCellRefresh): a read that fails
// (the directory group electing, or handing its leadership over, answers
// at once) is followed by another, so a token made a moment ago is not
// refused for a read that never happened.
const refreshReads = 3

// refreshFor reads the directory until found reports true, at most
// refreshReads reads (coalesced with every other caller's) and
// unknownCellRefresh in all; it reports found's last answer.
func (s *Server) refreshFor(found func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), unknownCellRefresh)
	defer cancel()
	for i := 0; i < refreshReads && ctx.Err() == nil; i++ {
		s.dir.refresh(ctx)
		if found() {
			return true
		}
	}
	return found()
}
