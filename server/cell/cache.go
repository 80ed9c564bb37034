package cell

// Client caching on the leader: who caches which node (cachers.Table),
// the invalidations a change sends first, and the wait for them.

import (
	"context"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cachers"
	"github.com/lockservice/lockd/server/fsm"
	"github.com/lockservice/lockd/server/session"
)

// beforeChange makes path safe to change: no client serves it from a cache
// once the change commits. It waits until every client has seen this
// leadership (a new leader knows no cachers), then invalidates the
// sessions caching path and waits until each has acknowledged, its lease
// has run out, or the invalidation's deadline (one cache window after
// its last renewal before it) has passed. Reads of path are uncacheable until done is called,
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
// waits for all of them: each until its session acknowledged, ended, or
// the invalidation's deadline passed (session.Invalidation). A session
// past a deadline is refused as a cacher (revoke).
func (c *Cell) invalidate(ctx context.Context, byPaths map[uint64][]string) error {
	// Only a session's last invalidation needs waiting for: events are
	// acknowledged in order (seqs rise, so the last queued is the
	// highest, and its deadline the latest), and each deadline is fixed,
	// so waiting for the sessions in turn costs the slowest.
	last := map[uint64]session.Invalidation{}
	sent := 0
	for s, paths := range byPaths {
		for _, p := range paths {
			if inv, ok := c.sessions.Invalidate(s, p); ok {
				last[s] = inv
				sent++
			}
		}
	}
	c.invalSent.Add(uint64(sent))
	for s, inv := range last {
		if brokenCacheWindow {
			inv.Deadline = time.Time{}
		}
		res, err := c.sessions.WaitAcked(ctx, s, inv)
		if err != nil {
			return err
		}
		if res != session.Acked {
			c.revoke(s)
		}
	}
	c.invalAcked.Add(uint64(sent))
	return nil
}

// revoke refuses session s as a cacher for the rest of this leadership:
// it let an invalidation's deadline (or its lease) pass unacknowledged.
// Every path it may still hold is invalidated now, so that changes of
// them wait at most one more cache window (the deadlines of these), or
// until it acknowledges the last of them. Its reads are served uncached
// from now on.
func (c *Cell) revoke(s uint64) {
	paths, first := c.cachers.Revoke(s)
	if !first {
		return
	}
	c.log.Warn("session refused as a cacher: a cache invalidation went unacknowledged past its deadline",
		"session", s, "paths", len(paths))
	var flush session.Invalidation
	for _, p := range paths {
		if inv, ok := c.sessions.Invalidate(s, p); ok {
			flush = inv
		}
	}
	c.invalSent.Add(uint64(len(paths)))
	if flush.Seq != 0 {
		c.sessions.Flushing(s, flush)
	}
}

// registerCacher records the reader's session as a cacher of path if it
// may cache (a lease here, no change of path in flight, no invalidation
// it has not acknowledged, not refused, under the caps), and returns the
// leader epoch it was recorded under (0: not recorded, the read is
// served uncached). A missing or ephemeral node is never recorded: no
// client caches it. A session's first cacheable read first commits that
// it caches.
func (c *Cell) registerCacher(ctx context.Context, req api.ReadRequest) uint64 {
	if !req.Cache || req.Session == 0 || req.Watch != "" || !c.sessions.Has(req.Session) || c.sessions.Outstanding(req.Session) {
		return 0
	}
	// While a new leader's fence runs, nobody is made a cacher: a change
	// waits out the fence first, and an invalidation it then sends would
	// have a deadline a whole window later still.
	if !c.sessions.Fenced() && !brokenFenceCachers {
		return 0
	}
	chk, ok := c.cacheCheckOf(req.Path, req.Session)
	if !ok || !chk.cacheable || !chk.live {
		return 0
	}
	if !c.sessions.Caches(req.Session) {
		if _, err := c.propose(ctx, &fsm.Command{Op: fsm.OpCacheSession, Target: req.Session}); err != nil || !c.sessions.Caches(req.Session) {
			return 0
		}
	}
	active, epoch := c.sessions.Active()
	if !active || c.cachers.Register(req.Path, req.Session, chk.tenant) != cachers.Registered {
		return 0
	}
	return epoch
}

// CacheCounters are the leader's cache figures.
type CacheCounters struct {
	CachedPaths, Cachers int
	InvalidationsSent    uint64
	InvalidationsAcked   uint64
	// DeadlinesMissed counts invalidations whose deadline passed
	// unacknowledged; Revoked the sessions refused as cachers for it.
	DeadlinesMissed, Revoked uint64
	// OverSessionCap and OverTenantCap count reads served uncached at
	// api.MaxCachedPathsPerSession and api.MaxCachedPathsPerTenant.
	OverSessionCap, OverTenantCap uint64
	// OldestChange is how long the oldest change still waiting for its
	// cachers has waited (0 if none).
	OldestChange time.Duration
}

// CacheCounters reads the cache figures.
func (c *Cell) CacheCounters() CacheCounters {
	paths, entries, oldest := c.cachers.Stats()
	n := c.cachers.Counts()
	k := CacheCounters{CachedPaths: paths, Cachers: entries, InvalidationsSent: c.invalSent.Load(), InvalidationsAcked: c.invalAcked.Load(),
		DeadlinesMissed: c.sessions.Missed(), Revoked: n.Revoked, OverSessionCap: n.OverSession, OverTenantCap: n.OverTenant}
	if !oldest.IsZero() {
		k.OldestChange = time.Since(oldest)
	}
	return k
}
