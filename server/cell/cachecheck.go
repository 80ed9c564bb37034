package cell

// The leader's look at a node before it records a cacher of it.

import "github.com/lockservice/lockd/server/fsm"

// cacheCheckQuery asks this replica's applied state whether path is a node
// a client could cache (it exists and is not ephemeral) and which tenant
// opened session: a cacheCheck.
type cacheCheckQuery struct {
	path    string
	session uint64
}

type cacheCheck struct {
	cacheable bool
	tenant    string
	live      bool
}

func (q cacheCheckQuery) run(s *fsm.State) cacheCheck {
	n, ok := s.Get(q.path)
	tenant, live := s.SessionTenant(q.session)
	return cacheCheck{cacheable: ok && !n.Ephemeral, tenant: tenant, live: live}
}

// cacheCheckOf runs q on this replica's state (a local read: the answer
// only decides whether to record a cacher, and a read not recorded is
// served uncached whatever the node is by then). ok false on any error.
func (c *Cell) cacheCheckOf(path string, session uint64) (cacheCheck, bool) {
	v, err := c.nh.StaleRead(c.cfg.Info.ShardID, cacheCheckQuery{path: path, session: session})
	if err != nil {
		return cacheCheck{}, false
	}
	return v.(cacheCheck), true
}
