package etcdgw

import (
	"context"

	"github.com/lockservice/lockd/api"
)

// feedStream is one subscriber's view of the feed: every change under
// the prefix from index from on, in index order, without gaps. It
// catches up with reads of its own from from to the shared reader's
// position, then follows the shared reader. Not safe for concurrent use.
type feedStream struct {
	f     *changeFeed
	p     PrefixInfo
	sub   *feedSub
	epoch uint64 // the epoch the stream's indexes are of (0: the first answer's)
	next  uint64 // the first index not yet returned
	live  uint64 // the shared reader's position: below it, catch up
	reads int    // catch-up reads so far (bounded: feedCatchUpReads)
	// history: the stream starts at the ring's Floor (whatever it is)
	// and reads up to from as history: changes before from a prev_kv
	// watch only remembers.
	history bool
	from    uint64 // the index the stream was opened at
}

// open starts a stream of p's changes at indexes >= from, of the prefix
// epoch epoch (0: whichever the feed reads; a different one ends the
// stream with errFeedMoved).
func (f *changeFeed) open(p PrefixInfo, from, epoch uint64) (*feedStream, error) {
	from = max(from, 1)
	sub, pos, err := f.subscribe(p, from)
	if err != nil {
		return nil, err
	}
	return &feedStream{f: f, p: p, sub: sub, epoch: epoch, next: from, live: pos, from: from}, nil
}

// openWithHistory is open, but the stream starts at the ring's Floor:
// the changes below from come first, for a prev_kv watch to learn the
// keys' values before from. A Floor above from is still compacted.
func (f *changeFeed) openWithHistory(p PrefixInfo, from, epoch uint64) (*feedStream, error) {
	s, err := f.open(p, from, epoch)
	if err != nil {
		return nil, err
	}
	if s.live > 1 {
		s.next, s.history = 1, true
	}
	return s, nil
}

// close ends the stream.
func (s *feedStream) close() { s.f.unsubscribe(s.sub) }

// healthy reports whether the shared reader's last read succeeded (a
// waiter polls with range reads while it does not).
func (s *feedStream) healthy() bool {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.sub.r.failures == 0
}

// position is the first index the stream has not returned: every change
// below it has been.
func (s *feedStream) position() uint64 { return s.next }

// read returns the next batch (possibly empty: the feed moved on with no
// change), or why the stream ended (errFeedCompacted, errFeedMoved,
// errFeedOverflow, *errFeedUnavailable, or ctx's error).
func (s *feedStream) read(ctx context.Context) (feedBatch, error) {
	if s.next < s.live {
		return s.catchUp(ctx)
	}
	select {
	case b, ok := <-s.sub.ch:
		if !ok {
			return feedBatch{}, s.sub.err
		}
		return s.take(b)
	case <-ctx.Done():
		return feedBatch{}, ctx.Err()
	}
}

// take checks b's epoch and drops what the stream already returned.
func (s *feedStream) take(b feedBatch) (feedBatch, error) {
	if s.epoch == 0 {
		s.epoch = b.epoch
	}
	if b.epoch != s.epoch {
		return feedBatch{}, errFeedMoved
	}
	i := 0
	for i < len(b.changes) && b.changes[i].Index < s.next {
		i++
	}
	b.changes = b.changes[i:]
	if b.through+1 > s.next {
		s.next = b.through + 1
	}
	return b, nil
}

// catchUp reads the ring from s.next (below the shared reader's
// position) with a read of its own, without waiting.
func (s *feedStream) catchUp(ctx context.Context) (feedBatch, error) {
	if s.reads >= feedCatchUpReads {
		return feedBatch{}, &errFeedUnavailable{err: &api.Error{Code: api.CodeUnavailable, Message: "catching up with the change ring took too many reads"}}
	}
	s.reads++
	var resp api.ChangesResponse
	if err := s.f.be.CallOwn(ctx, api.RouteChanges, &api.ChangesRequest{Root: s.p.Prefix, From: s.next}, &resp); err != nil {
		if ctx.Err() != nil {
			return feedBatch{}, ctx.Err()
		}
		if permanentFeedError(err) {
			return feedBatch{}, &errFeedUnavailable{err: err}
		}
		sleepCtx(ctx, feedRetryMin)
		return feedBatch{epoch: s.epoch, through: s.next - 1}, nil
	}
	if s.history && resp.Floor > s.next && resp.Floor <= s.from {
		s.next = resp.Floor // history from the ring's Floor: nothing is missed below from
		return feedBatch{epoch: resp.Epoch, through: s.next - 1}, nil
	}
	b, err := batchOf(s.next, &resp)
	if err != nil {
		return feedBatch{}, err
	}
	// What the shared reader delivers is not taken twice: stop below it.
	n := 0
	for n < len(b.changes) && b.changes[n].Index < s.live {
		n++
	}
	b.changes = b.changes[:n]
	b.through = min(b.through, s.live-1)
	return s.take(b)
}
