package cell

// The leader's look at a node before it records a cacher of it.

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/fsm"
)

// cacheCheckQuery asks this replica's applied state whether path is a node
// a client could cache (it exists and is not ephemeral) and which tenant
// opened session, and whether its record holds path under epoch: a
// cacheCheck.
type cacheCheckQuery struct {
	path    string
	session uint64
	epoch   uint64
}

type cacheCheck struct {
	cacheable bool
	tenant    string
	live      bool
	// recorded: the session's committed record holds path under epoch.
	recorded bool
}

func (q cacheCheckQuery) run(s *fsm.State) (cacheCheck, error) {
	n, ok := s.Get(q.path)
	tenant, live := s.SessionTenant(q.session)
	cacheable := ok && cacheableNode(n)
	return cacheCheck{cacheable: cacheable, tenant: tenant, live: live, recorded: s.CacheRecorded(q.session, q.path, q.epoch)}, nil
}

// cacheCheckOf runs q on this replica's state (a local read: the answer
// only decides whether to record a cacher, and a read not recorded is
// served uncached whatever the node is by then). ok false on any error.
func (c *Cell) cacheCheckOf(path string, session, epoch uint64) (cacheCheck, bool) {
	r, err := readLocal(c, cacheCheckQuery{path: path, session: session, epoch: epoch}.run)
	if err != nil {
		return cacheCheck{}, false
	}
	return r, true
}

// cacheableNode: a client may cache n only if it is persistent and never
// had a child (its child index is still its create index). A child's
// create or delete changes a parent's metadata without a change of its
// own, so the first child's create invalidates the parent's cachers
// (cell.beforeCreate) and from then on the parent is never granted: a
// lock directory costs its lock creates no invalidation.
func cacheableNode(n api.Node) bool {
	if mutant.On(mutant.CachesParents) {
		return !n.Ephemeral
	}
	return !n.Ephemeral && n.NumChildren == 0 && n.ChildIndex == n.CreateIndex && !n.Container // a container goes without invalidation (fsm/container.go)
}
