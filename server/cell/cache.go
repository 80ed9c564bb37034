package cell

// Client caching on the leader: who caches which node (cachers.Table),
// the invalidations a change sends first, and the wait for them.

import (
	"context"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cachers"
	"github.com/lockservice/lockd/server/fsm"
	"github.com/lockservice/lockd/server/session"
)

// beforeDelete is beforeChangeOf for a delete. Deleting an ephemeral node (a
// lock released, a member leaving) skips the fence: no client can have
// cached it under an earlier leader (ephemeral nodes are never
// cacheable), and a persistent node that replaced it since this check was
// created under this leader, so its cachers are in the table and are
// invalidated as usual.
func (c *Cell) beforeDelete(ctx context.Context, path string) (done func(error), err error) {
	return c.beforeChangeOf(ctx, []string{path}, !c.ephemeralHere(path))
}

// beforeCreate is beforeChangeOf for a node created at path (a create, or a
// put that may create): the node itself was cached by nobody, but its
// parent's child count and child index change, so the parent (and, with
// make_parents, every ancestor that exists) is invalidated first. A node
// that ever had a child is never granted to a cache (cacheableNode), so
// only a first child's create can change what a cached node's metadata
// says, and a lock directory's creates find no cachers to wait for.
func (c *Cell) beforeCreate(ctx context.Context, path string, makeParents bool, also ...string) (done func(error), err error) {
	paths := append([]string{}, also...)
	for p := api.Parent(path); p != "/"; p = api.Parent(p) {
		paths = append(paths, p)
		if !makeParents {
			break
		}
	}
	if len(paths) == 0 || mutant.On(mutant.SkipsParent) {
		return func(error) {}, nil
	}
	return c.beforeChangeOf(ctx, paths, true)
}

// ephemeralHere reports whether this replica's state has an ephemeral
// node at path.
func (c *Cell) ephemeralHere(path string) bool {
	q := getQuery{path: path}
	r, err := readLocal(c, func(s *fsm.State) (api.GetResponse, error) { return c.lookupGet(s, q) })
	if err != nil {
		return false
	}
	return r.Exists && r.Node.Ephemeral
}

// beforeChangeOf makes paths safe to change: no client serves one from a
// cache once the change commits. It waits until no session may still
// serve one of them from an earlier leader's grant (the fence, per node:
// session.WaitFencedFor), then invalidates the sessions caching them and
// waits until each has acknowledged, its lease has run out, or the
// invalidation's deadline (one cache window after its last renewal before
// it) has passed. Reads of the paths are uncacheable until done is called
// with the proposal's error (finish): at once if the change applied or was
// refused, else once its fate is known. An error means the change must not
// be proposed: nothing was applied. Without fence (an ephemeral node's
// delete) it does not wait for the fence.
func (c *Cell) beforeChangeOf(ctx context.Context, paths []string, fence bool) (done func(error), err error) {
	if mutant.On(mutant.SkipsInvalidation) {
		return func(error) {}, nil
	}
	if fence && !mutant.On(mutant.SkipsFence) {
		if err := c.sessions.WaitFencedFor(ctx, session.Scope{Paths: paths}); err != nil {
			return nil, err
		}
	}
	byPaths := map[uint64][]string{}
	ends := make([]func(bool), 0, len(paths))
	for _, p := range paths {
		sessions, end := c.cachers.Begin(p, time.Now())
		ends = append(ends, end)
		for _, s := range sessions {
			byPaths[s] = append(byPaths[s], p)
		}
	}
	end := func(acked bool) {
		for _, e := range ends {
			e(acked)
		}
	}
	if err := c.invalidate(ctx, byPaths); err != nil {
		end(false)
		return nil, err
	}
	return c.finish(func() { end(true) }), nil
}

// beforeSeal is beforeChangeOf for every node under prefix.
func (c *Cell) beforeSeal(ctx context.Context, prefix string) (done func(error), err error) {
	if err := c.sessions.WaitFencedFor(ctx, session.Scope{Under: prefix}); err != nil {
		return nil, err
	}
	byPaths, end := c.cachers.BeginUnder(prefix, time.Now())
	if err := c.invalidate(ctx, byPaths); err != nil {
		end(false)
		return nil, err
	}
	return c.finish(func() { end(true) }), nil
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
		if mutant.On(mutant.CacheWindow) {
			inv.Deadline = time.Time{}
		}
		res, err := c.sessions.WaitAcked(ctx, s, inv)
		if err != nil {
			return err
		}
		if res != session.Acked && res != session.Lapsed {
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

// registerCacher grants the reader's session path to cache if it may (a
// lease here, no change of path in flight, no invalidation it has not
// acknowledged, not refused, under the caps, past the fence for it and
// for path: session.MayGrant, and a write of its tenant's quota to spend:
// grant), and returns the leader epoch it was granted under (0: not
// granted, the read is served uncached). A missing, ephemeral or parent
// node is never granted (cachecheck.go). The session enters the cachers
// table first, then the grant is committed to its record (recordGrant)
// before the read is answered, so that a later leader knows whom a change
// of path must wait for.
func (c *Cell) registerCacher(ctx context.Context, req api.ReadRequest, grant GrantCheck) uint64 {
	if !c.mayCache(req) {
		return 0
	}
	active, epoch := c.sessions.Active()
	chk, ok := c.cacheCheckOf(req.Path, req.Session, epoch)
	if !active || !ok || !chk.cacheable || !chk.live {
		return 0
	}
	if c.cachers.Register(req.Path, req.Session, chk.tenant) != cachers.Registered {
		return 0
	}
	if !c.recordGrant(ctx, req.Session, req.Path, epoch, grant) {
		return 0
	}
	if now, still := c.sessions.Active(); !now || still != epoch {
		return 0
	}
	return epoch
}

// mayCache reports whether the session manager lets req's session be
// granted req's node now: a cacheable read from a session with a lease
// here and no invalidation outstanding, declaring a cache window within
// its session's, and past the fence for the session and the node
// (session.MayGrant). Inside the fence a grant would make the node's next
// change wait for the fence and then a cache window more for a silent
// reader, and would replace the reader's committed record of what an
// earlier leader granted it, which the next leader's fence reads.
func (c *Cell) mayCache(req api.ReadRequest) bool {
	if !req.Cache || req.Session == 0 || req.Watch != "" || !c.sessions.Has(req.Session) || c.sessions.Outstanding(req.Session) {
		return false
	}
	if !c.sessions.WindowWithin(req.Session, time.Duration(req.CacheWindowMS)*time.Millisecond) && !mutant.On(mutant.DeclaredWindow) {
		return false // a client that may serve longer than the leader waits
	}
	return c.sessions.MayGrant(req.Session, req.Path) || mutant.On(mutant.FenceCachers)
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
	// GrantsOverQuota counts reads served uncached because the reader's
	// tenant had no write to spend on the grant.
	GrantsOverQuota uint64
}

// CacheCounters reads the cache figures.
func (c *Cell) CacheCounters() CacheCounters {
	paths, entries, oldest := c.cachers.Stats()
	n := c.cachers.Counts()
	k := CacheCounters{CachedPaths: paths, Cachers: entries, InvalidationsSent: c.invalSent.Load(), InvalidationsAcked: c.invalAcked.Load(),
		DeadlinesMissed: c.sessions.Missed(), Revoked: n.Revoked, OverSessionCap: n.OverSession, OverTenantCap: n.OverTenant,
		GrantsOverQuota: c.grantsRefused.Load()}
	if !oldest.IsZero() {
		k.OldestChange = time.Since(oldest)
	}
	return k
}
