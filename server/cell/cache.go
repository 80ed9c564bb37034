package cell

// Client caching on the leader: who caches which node (cachers.Table),
// the invalidations a change sends first, and the wait for them.

import (
	"context"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// beforeChange makes path safe to change: no client serves it from a cache
// once the change commits. It waits until every client has seen this
// leadership (a new leader knows no cachers), then invalidates the
// sessions caching path and waits until each has acknowledged or its
// lease has run out. Reads of path are uncacheable until done is called,
// after the change applied (or failed). An error means the change must
// not be proposed: nothing was applied.
func (c *Cell) beforeChange(ctx context.Context, path string) (done func(), err error) {
	return c.beforeChangeOf(ctx, path, true)
}

// beforeDelete is beforeChange for a delete. Deleting an ephemeral node (a
// lock released, a member leaving) skips the fence: no client can have
// cached it under an earlier leader (ephemeral nodes are never
// cacheable), and a persistent node that replaced it since this check was
// created under this leader, so its cachers are in the table and are
// invalidated as usual. The lock path stays as fast after a fail-over as
// before caching existed.
func (c *Cell) beforeDelete(ctx context.Context, path string) (done func(), err error) {
	return c.beforeChangeOf(ctx, path, !c.ephemeralHere(path))
}

// ephemeralHere reports whether this replica's state has an ephemeral
// node at path.
func (c *Cell) ephemeralHere(path string) bool {
	v, err := c.nh.StaleRead(c.cfg.Info.ShardID, getQuery{path: path})
	if err != nil {
		return false
	}
	r := v.(api.GetResponse)
	return r.Exists && r.Node.Ephemeral
}

func (c *Cell) beforeChangeOf(ctx context.Context, path string, fence bool) (done func(), err error) {
	if brokenSkipsInvalidation {
		return func() {}, nil
	}
	if fence && !brokenSkipsFence {
		if err := c.sessions.WaitFenced(ctx); err != nil {
			return nil, err
		}
	}
	sessions, end := c.cachers.Begin(path, time.Now())
	byPaths := make(map[uint64][]string, len(sessions))
	for _, s := range sessions {
		byPaths[s] = []string{path}
	}
	if err := c.invalidate(ctx, byPaths); err != nil {
		end(false)
		return nil, err
	}
	return func() { end(true) }, nil
}

// beforeSeal is beforeChange for every node under prefix.
func (c *Cell) beforeSeal(ctx context.Context, prefix string) (done func(), err error) {
	if err := c.sessions.WaitFenced(ctx); err != nil {
		return nil, err
	}
	byPaths, end := c.cachers.BeginUnder(prefix, time.Now())
	if err := c.invalidate(ctx, byPaths); err != nil {
		end(false)
		return nil, err
	}
	return func() { end(true) }, nil
}

// invalidate sends each session an invalidation of each of its paths and
// waits for all of them.
func (c *Cell) invalidate(ctx context.Context, byPaths map[uint64][]string) error {
	// Only a session's last invalidation needs waiting for: events are
	// acknowledged in order (seqs rise, so the last queued is the
	// highest), and waiting for each session in turn costs the slowest.
	last := map[uint64]uint64{}
	sent := 0
	for s, paths := range byPaths {
		for _, p := range paths {
			if seq, ok := c.sessions.Invalidate(s, p); ok {
				last[s] = seq
				sent++
			}
		}
	}
	c.invalSent.Add(uint64(sent))
	for s, seq := range last {
		if err := c.sessions.WaitAcked(ctx, s, seq); err != nil {
			return err
		}
	}
	c.invalAcked.Add(uint64(sent))
	return nil
}

// registerCacher records the reader's session as a cacher of path if it
// may cache (a lease here, no change of path in flight), and returns the
// leader epoch it was recorded under (0: not recorded, the read is
// served uncached). A session's first cacheable read first commits that
// it caches.
func (c *Cell) registerCacher(ctx context.Context, req api.ReadRequest) uint64 {
	if !req.Cache || req.Session == 0 || req.Watch != "" || !c.sessions.Has(req.Session) {
		return 0
	}
	if !c.sessions.Caches(req.Session) {
		if _, err := c.propose(ctx, &fsm.Command{Op: fsm.OpCacheSession, Target: req.Session}); err != nil || !c.sessions.Caches(req.Session) {
			return 0
		}
	}
	active, epoch := c.sessions.Active()
	if !active || !c.cachers.Register(req.Path, req.Session) {
		return 0
	}
	return epoch
}

// CacheCounters are the leader's cache figures.
type CacheCounters struct {
	CachedPaths, Cachers int
	InvalidationsSent    uint64
	InvalidationsAcked   uint64
	// OldestChange is how long the oldest change still waiting for its
	// cachers has waited (0 if none).
	OldestChange time.Duration
}

// CacheCounters reads the cache figures.
func (c *Cell) CacheCounters() CacheCounters {
	paths, entries, oldest := c.cachers.Stats()
	k := CacheCounters{CachedPaths: paths, Cachers: entries, InvalidationsSent: c.invalSent.Load(), InvalidationsAcked: c.invalAcked.Load()}
	if !oldest.IsZero() {
		k.OldestChange = time.Since(oldest)
	}
	return k
}
