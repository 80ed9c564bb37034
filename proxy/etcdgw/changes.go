package etcdgw

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// The change feed: the cells' change rings (api.RouteChanges) read by
// one long-poll reader per (cell, top-level prefix), shared by every
// watch and every waiter (waitGone, waitChange) of this gateway on that
// prefix. The reader reads with the proxy's own credentials and hands
// every change of the prefix to its subscribers, in index order; each
// subscriber filters its own span, and a watch checked the caller's
// grant on its span before it subscribed (watch_acl.go). A subscriber
// that wants changes from before the reader's position catches up with
// reads of its own, then follows the shared reader. A reader starts
// with its first subscriber and stops with its last.

// Bounds of the change feed.
const (
	// MaxFeedReaders bounds the readers (one per cell and prefix) one
	// gateway runs at once; a subscriber that would start one more is
	// refused limit_exceeded.
	MaxFeedReaders = 256
	// MaxFeedSubscribers bounds the subscribers (watches and waiters) of
	// one gateway over all its readers.
	MaxFeedSubscribers = 20_000
	// feedSubQueue bounds the batches a subscriber may have pending (each
	// at most api.MaxChangesPerRead changes); a subscriber that falls
	// further behind is dropped with errFeedOverflow, never blocking the
	// reader and the others.
	feedSubQueue = 64
	// feedRetryMin and feedRetryMax bound the back-off of a reader whose
	// read failed (no leader yet, a proxy restart).
	feedRetryMin = 100 * time.Millisecond
	feedRetryMax = 2 * time.Second
	// feedMaxFailures is how many reads in a row may fail before the
	// reader gives up and ends its subscribers with errFeedUnavailable
	// (about a minute at feedRetryMax).
	feedMaxFailures = 30
	// feedCatchUpReads bounds the reads of one catch-up: the ring holds
	// at most api.MaxChangeRing changes, read api.MaxChangesPerRead at a
	// time, with room for retries.
	feedCatchUpReads = 4*api.MaxChangeRing/api.MaxChangesPerRead + 8
	// feedEmptyPause is the least time between two reads of a reader
	// whose read came back at once with no change (the cell held no long
	// poll for it): at most one such read per pause, never a spin.
	feedEmptyPause = 100 * time.Millisecond
	// feedPollInterval is how often a waiter whose feed failed (no ring
	// on the cell, a gap) polls the node or span with a range read.
	feedPollInterval = 200 * time.Millisecond
	// feedWaitRecheck is how often a waiter re-reads its node or span
	// even while the feed runs (a safety net under the feed).
	feedWaitRecheck = 5 * time.Second
)

// Why a subscription ended. A watch answers each with a cancel; a
// waiter re-checks with a range read.
var (
	// errFeedCompacted: the ring no longer holds changes the subscriber
	// needs (Floor above them: the ring turned over, or a new leader
	// restarted from a snapshot).
	errFeedCompacted = errors.New("the changes needed are no longer in the cell's change ring (compacted)")
	// errFeedMoved: the prefix's directory epoch changed (it moved to
	// another cell): its revisions start over in a new index space.
	errFeedMoved = errors.New("the prefix moved to another cell: revisions changed")
	// errFeedOverflow: the subscriber did not keep up with the feed.
	errFeedOverflow = errors.New("the watcher fell too far behind the change feed")
)

// compactedError is errFeedCompacted with the ring's Floor: the lowest
// index it still holds.
type compactedError struct{ floor uint64 }

func (e *compactedError) Error() string   { return errFeedCompacted.Error() }
func (e *compactedError) Is(t error) bool { return t == errFeedCompacted }

// errFeedUnavailable wraps the error that made a reader give up.
type errFeedUnavailable struct{ err error }

func (e *errFeedUnavailable) Error() string {
	return "the cell's change feed is unavailable: " + e.err.Error()
}
func (e *errFeedUnavailable) Unwrap() error { return e.err }

// feedKey names one reader.
type feedKey struct{ cell, root string }

// feedBatch is one read's changes: every change under the reader's root
// at indexes up to through that the subscriber had not had yet, in
// index order.
type feedBatch struct {
	changes []api.Change
	through uint64
	epoch   uint64
}

// changeFeed is the gateway's set of readers.
type changeFeed struct {
	be  Backend
	ctx context.Context // the gateway's: readers end with it
	// wg counts the readers running: Gateway.Close waits for them, so
	// none still reads through the proxy as the proxy closes.
	wg sync.WaitGroup

	mu      sync.Mutex
	readers map[feedKey]*feedReader
	nsubs   int
}

func newChangeFeed(ctx context.Context, be Backend) *changeFeed {
	return &changeFeed{be: be, ctx: ctx, readers: make(map[feedKey]*feedReader)}
}

// feedReader is the one long-poll reader of a (cell, prefix).
type feedReader struct {
	key    feedKey
	cancel context.CancelFunc
	// next is the first index the next read asks for; epoch the prefix
	// epoch of the reader's answers (0 before the first). Both under
	// changeFeed.mu.
	next    uint64
	epoch   uint64
	stopped bool
	// failures counts the reads in a row that failed (waiters poll
	// instead while it is not 0).
	failures int
	subs     map[*feedSub]struct{}
}

// feedSub is one subscriber of a reader.
type feedSub struct {
	r  *feedReader
	ch chan feedBatch
	// err says why ch was closed (set before the close).
	err error
}

// subscribe adds a subscriber to the reader of p (starting it at from if
// it is not running) and returns the reader's position: the subscriber
// gets every change at indexes >= pos through ch.
func (f *changeFeed) subscribe(p PrefixInfo, from uint64) (*feedSub, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nsubs >= MaxFeedSubscribers {
		return nil, 0, &api.Error{Code: api.CodeLimitExceeded, Message: fmt.Sprintf("the gateway has %d watchers and waiters (MaxFeedSubscribers)", MaxFeedSubscribers)}
	}
	key := feedKey{cell: p.Cell, root: p.Prefix}
	r := f.readers[key]
	if r == nil {
		if len(f.readers) >= MaxFeedReaders {
			return nil, 0, &api.Error{Code: api.CodeLimitExceeded, Message: fmt.Sprintf("the gateway follows %d prefixes' change feeds (MaxFeedReaders)", MaxFeedReaders)}
		}
		ctx, cancel := context.WithCancel(f.ctx)
		r = &feedReader{key: key, cancel: cancel, next: max(from, 1), subs: make(map[*feedSub]struct{})}
		f.readers[key] = r
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.run(ctx, r)
		}()
	}
	s := &feedSub{r: r, ch: make(chan feedBatch, feedSubQueue)}
	r.subs[s] = struct{}{}
	f.nsubs++
	return s, r.next, nil
}

// unsubscribe removes s (if still there); the reader stops with its last
// subscriber.
func (f *changeFeed) unsubscribe(s *feedSub) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropLocked(s, nil)
}

// dropLocked removes s from its reader, closing its channel with why
// (nil: the subscriber left on its own).
func (f *changeFeed) dropLocked(s *feedSub, why error) {
	r := s.r
	if _, ok := r.subs[s]; !ok {
		return
	}
	delete(r.subs, s)
	f.nsubs--
	s.err = why
	close(s.ch)
	if len(r.subs) == 0 && !r.stopped {
		r.stopped = true
		r.cancel()
		delete(f.readers, r.key)
	}
}

// failAllLocked ends every subscriber of r with why (the reader then
// stops: it has none left).
func (f *changeFeed) failAllLocked(r *feedReader, why error) {
	for s := range r.subs {
		f.dropLocked(s, why)
	}
}

// run is r's read loop, until it has no subscriber (ctx ends).
func (f *changeFeed) run(ctx context.Context, r *feedReader) {
	backoff, failures := feedRetryMin, 0
	for ctx.Err() == nil {
		f.mu.Lock()
		from := r.next
		f.mu.Unlock()
		var resp api.ChangesResponse
		sent := time.Now()
		err := f.be.CallOwn(ctx, api.RouteChanges, &api.ChangesRequest{Root: r.key.root, From: from, WaitMS: api.MaxChangesWaitMS}, &resp)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			f.setFailures(r, failures)
			if permanentFeedError(err) || failures >= feedMaxFailures {
				f.mu.Lock()
				f.failAllLocked(r, &errFeedUnavailable{err: err})
				f.mu.Unlock()
				return
			}
			sleepCtx(ctx, backoff)
			backoff = min(2*backoff, feedRetryMax)
			continue
		}
		backoff, failures = feedRetryMin, 0
		f.setFailures(r, 0)
		f.deliver(r, from, &resp)
		if len(resp.Changes) == 0 && time.Since(sent) < feedEmptyPause {
			// Answered at once with nothing: the cell did not hold the
			// read (its MaxChangesWaiters are taken, perhaps by a
			// tenant's own long polls). Pace the next read rather than
			// spin on the leader.
			sleepCtx(ctx, feedEmptyPause)
		}
	}
}

// setFailures records r's failed reads in a row.
func (f *changeFeed) setFailures(r *feedReader, n int) {
	f.mu.Lock()
	r.failures = n
	f.mu.Unlock()
}

// deliver hands one answer to r's subscribers and advances r.
func (f *changeFeed) deliver(r *feedReader, from uint64, resp *api.ChangesResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.stopped || r.next != from {
		return
	}
	if r.epoch != 0 && resp.Epoch != r.epoch {
		f.failAllLocked(r, errFeedMoved)
		return
	}
	r.epoch = resp.Epoch
	b, err := batchOf(from, resp)
	if err != nil {
		f.failAllLocked(r, err)
		return
	}
	r.next = b.through + 1
	for s := range r.subs {
		select {
		case s.ch <- b:
		default:
			f.dropLocked(s, errFeedOverflow)
		}
	}
}

// batchOf is the batch an answer to a read from index from carries:
// errFeedCompacted if the ring's Floor is above from. A cell never cuts
// an index between two reads (fsm ReadChanges), so with More the next
// read starts after the last index read.
func batchOf(from uint64, resp *api.ChangesResponse) (feedBatch, error) {
	if resp.Floor > from {
		if !mutant.On(mutant.EtcdWatchGap) {
			return feedBatch{}, &compactedError{floor: resp.Floor}
		}
		from = resp.Floor // broken: replays from Floor, silently skipping the changes below it
	}
	b := feedBatch{changes: resp.Changes, through: max(resp.Index, from-1), epoch: resp.Epoch}
	if resp.More && len(resp.Changes) > 0 {
		b.through = resp.Changes[len(resp.Changes)-1].Index
	}
	return b, nil
}

// permanentFeedError: an answer a retry will not change (the proxy may
// not read the ring, the cell has none, the root is bad).
func permanentFeedError(err error) bool {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Code {
	case api.CodeUnauthorized, api.CodeForbidden, api.CodeBadRequest, api.CodeInvalidPath, api.CodeNotFound, api.CodeInternal:
		return true
	}
	return false
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
