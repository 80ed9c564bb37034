package etcdgw

import (
	"context"
	"errors"
	"time"

	"github.com/lockservice/lockd/api"
)

// Waiters: what the Lock and Election services wait on. Each follows the
// feed and re-reads with a range read every feedWaitRecheck as a safety
// net; when the feed fails (no ring on the cell, a gap, a move) it polls
// with range reads every feedPollInterval instead. The range reads use
// the proxy's credentials: a waiter only learns "changed" or "gone",
// and its caller reads what it needs with the caller's own token.

// waitGone returns when the node path is deleted at an index above
// afterIndex (or is missing, or is a newer node of the same path), when
// the prefix's epoch changed under it (the caller re-reads: indexes
// start over), or with ctx's error.
func (f *changeFeed) waitGone(ctx context.Context, p PrefixInfo, path string, afterIndex uint64) error {
	s, err := f.open(p, afterIndex+1, p.Epoch)
	if feedFull(err) {
		return f.pollGone(ctx, p, path, afterIndex)
	}
	if err != nil {
		return err
	}
	defer s.close()
	checked := time.Now()
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, feedPollInterval)
		b, err := s.read(rctx)
		cancel()
		switch {
		case err == nil:
			if deletedIn(b, path) {
				return nil
			}
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// The safety net below: every feedWaitRecheck, or at each
			// poll while the feed's reads fail.
		default:
			return f.pollGone(ctx, p, path, afterIndex)
		}
		if s.healthy() && time.Since(checked) < feedWaitRecheck {
			continue
		}
		checked = time.Now()
		if gone, err := f.isGone(ctx, p, path, afterIndex); err == nil && gone {
			return nil
		}
	}
	return ctx.Err()
}

// deletedIn reports whether b deletes path.
func deletedIn(b feedBatch, path string) bool {
	for _, c := range b.changes {
		if c.Kind == api.ChangeDelete && c.Node.Path == path {
			return true
		}
	}
	return false
}

// pollGone is waitGone with range reads only.
func (f *changeFeed) pollGone(ctx context.Context, p PrefixInfo, path string, afterIndex uint64) error {
	t := time.NewTicker(feedPollInterval)
	defer t.Stop()
	for {
		if gone, err := f.isGone(ctx, p, path, afterIndex); err == nil && gone {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// isGone reads path: gone if missing, created after afterIndex (the one
// waited on was deleted), or if the prefix's epoch changed.
func (f *changeFeed) isGone(ctx context.Context, p PrefixInfo, path string, afterIndex uint64) (bool, error) {
	var resp api.RangeResponse
	err := f.be.CallOwn(ctx, api.RouteRange, &api.RangeRequest{Root: p.Prefix, Start: path, KeysOnly: true}, &resp)
	if err != nil {
		return false, err
	}
	if p.Epoch != 0 && resp.Epoch != p.Epoch {
		return true, nil
	}
	return len(resp.Nodes) == 0 || resp.Nodes[0].CreateIndex > afterIndex, nil
}

// waitChange returns the index of the first change to a node (not a
// container) whose path lies in [start, end) (end "": exactly start)
// above afterIndex. When the feed cannot say (a gap, a move, no ring)
// it returns an index at which something may have changed: callers
// re-read, and never miss a change.
func (f *changeFeed) waitChange(ctx context.Context, p PrefixInfo, start, end string, afterIndex uint64) (uint64, error) {
	s, err := f.open(p, afterIndex+1, p.Epoch)
	if feedFull(err) {
		return f.pollChange(ctx, p, start, end, afterIndex)
	}
	if err != nil {
		return 0, err
	}
	defer s.close()
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, feedPollInterval)
		b, err := s.read(rctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && s.healthy():
			continue
		default: // the feed failed, or its reads fail: poll instead
			return f.pollChange(ctx, p, start, end, afterIndex)
		}
		for _, c := range b.changes {
			if !c.Node.Container && inSpan(c.Node.Path, start, end) {
				return c.Index, nil
			}
		}
	}
	return 0, ctx.Err()
}

// pollChange is waitChange with range reads: it returns the read's index
// as soon as a node in the span is newer than afterIndex or the span's
// nodes differ from the first read's (a delete), or the epoch changed.
func (f *changeFeed) pollChange(ctx context.Context, p PrefixInfo, start, end string, afterIndex uint64) (uint64, error) {
	t := time.NewTicker(feedPollInterval)
	defer t.Stop()
	var first []string
	for {
		var resp api.RangeResponse
		err := f.be.CallOwn(ctx, api.RouteRange, &api.RangeRequest{Root: p.Prefix, Start: start, End: end, KeysOnly: true, SkipContainers: true}, &resp)
		if err == nil {
			paths, newer := spanSummary(resp.Nodes, afterIndex)
			switch {
			case p.Epoch != 0 && resp.Epoch != p.Epoch, newer, resp.More:
				return max(resp.Index, afterIndex+1), nil
			case first == nil:
				first = paths
			case !sameStrings(first, paths):
				return max(resp.Index, afterIndex+1), nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// spanSummary lists nodes' paths and says whether one was created or
// written after afterIndex.
func spanSummary(nodes []api.Node, afterIndex uint64) (paths []string, newer bool) {
	paths = make([]string, 0, len(nodes))
	for _, n := range nodes {
		paths = append(paths, n.Path)
		if n.ModifyIndex > afterIndex || n.CreateIndex > afterIndex {
			newer = true
		}
	}
	return paths, newer
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// inSpan reports whether path lies in [start, end) in byte order (end
// "": path is start).
func inSpan(path, start, end string) bool {
	if end == "" {
		return path == start
	}
	return path >= start && path < end
}

// feedFull: the feed refused a subscriber (MaxFeedSubscribers or
// MaxFeedReaders reached, perhaps by other tenants' watches). A waiter
// then polls: a Lock or Campaign is never refused for a full feed.
func feedFull(err error) bool {
	return err != nil && api.CodeOf(err) == api.CodeLimitExceeded
}
