package fsm

import (
	"github.com/lockservice/lockd/api"
)

// usage is what one tenant holds in the cell (derived: kept with every
// change and rebuilt from the sessions and nodes on restore).
type usage struct {
	sessions, nodes int
	bytes           int64
}

// cellLimits are the named per-cell limits (api/limits.go). Every replica
// enforces the same ones; only tests shrink them.
type cellLimits struct {
	sessions, nodes, children int
	bytes                     int64
	deletedDelays             int
	deletedDelaysPerTenant    int
}

var defaultLimits = cellLimits{sessions: api.MaxSessionsPerCell, nodes: api.MaxNodesPerCell, children: api.MaxChildrenPerNode, bytes: api.MaxBytesPerCell,
	deletedDelays: api.MaxDeletedLockDelays, deletedDelaysPerTenant: api.MaxDeletedLockDelaysPerTenant}

func nodeBytes(n *node) int64 { return int64(len(n.path) + len(n.value)) }

// checkGrowth refuses a change that would add nodes and bytes past the
// cell's limits, before anything changes.
func (s *State) checkGrowth(nodes int, bytes int64) *api.Error {
	if nodes > 0 && len(s.nodes)+nodes > s.limits.nodes {
		return api.Errorf(api.CodeLimitExceeded, "the cell holds %d nodes, limit %d (MaxNodesPerCell)", len(s.nodes), s.limits.nodes)
	}
	if bytes > 0 && s.bytes+bytes > s.limits.bytes {
		return api.Errorf(api.CodeLimitExceeded, "the cell holds %d bytes of paths and values; %d more would pass the limit %d (MaxBytesPerCell)", s.bytes, bytes, s.limits.bytes)
	}
	return nil
}

// checkChildren refuses a new child of parent past MaxChildrenPerNode.
func (s *State) checkChildren(parent *node) *api.Error {
	if parent.numChildren() >= s.limits.children {
		return api.Errorf(api.CodeLimitExceeded, "%s has %d children, limit %d (MaxChildrenPerNode)", parent.path, parent.numChildren(), s.limits.children)
	}
	return nil
}

// WatchQuota is how many watches a live session's tenant allows it to
// arm (its quota when the session opened); 0: no quota.
func (s *State) WatchQuota(id uint64) int {
	if sess, ok := s.sessions[id]; ok {
		return sess.maxWatches
	}
	return 0
}

// Usage is what tenant holds in the cell: sessions, nodes, bytes.
func (s *State) Usage(tenant string) (sessions, nodes int, bytes int64) {
	if u := s.tenants[tenant]; u != nil {
		return u.sessions, u.nodes, u.bytes
	}
	return 0, 0, 0
}

// use adds to a tenant's usage, dropping an entry that reaches zero.
func (s *State) use(tenant string, sessions, nodes int, bytes int64) {
	if tenant == "" {
		return
	}
	u := s.tenants[tenant]
	if u == nil {
		u = &usage{}
		s.tenants[tenant] = u
	}
	u.sessions += sessions
	u.nodes += nodes
	u.bytes += bytes
	if *u == (usage{}) {
		delete(s.tenants, tenant)
	}
}

// checkQuota refuses a change that would take the command's tenant past
// its quota (carried in the entry), before anything changes.
func (s *State) checkQuota(c *Command, sessions, nodes int, bytes int64) *api.Error {
	if c.Tenant == "" || c.Quota == nil {
		return nil
	}
	q := c.Quota.Effective()
	hs, hn, hb := s.Usage(c.Tenant)
	switch {
	case sessions > 0 && hs+sessions > q.Sessions:
		return api.Errorf(api.CodeQuotaExceeded, "tenant %s holds %d sessions on this cell, quota %d", c.Tenant, hs, q.Sessions)
	case nodes > 0 && hn+nodes > q.Nodes:
		return api.Errorf(api.CodeQuotaExceeded, "tenant %s holds %d nodes on this cell, quota %d", c.Tenant, hn, q.Nodes)
	case bytes > 0 && hb+bytes > q.Bytes:
		return api.Errorf(api.CodeQuotaExceeded, "tenant %s holds %d bytes on this cell; %d more would pass its quota %d", c.Tenant, hb, bytes, q.Bytes)
	}
	return nil
}
