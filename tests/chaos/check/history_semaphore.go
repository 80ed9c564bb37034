package check

import (
	"sync"
	"time"
)

// PermitGrant is one permit of a semaphore a workload client held: its
// token, when the client asked (just before Acquire, so before its permit
// node was created) and when its Release returned (0 if it did not
// return ok: the node's delete may not have committed).
type PermitGrant struct {
	Lock, Node, Worker string
	Token              uint64
	Asked, Released    time.Duration
}

// semRecords are the semaphore workload's grants, under their own lock.
type semRecords struct {
	mu     sync.Mutex
	grants []PermitGrant
}

// AddPermitGrant records one permit held.
func (h *History) AddPermitGrant(g PermitGrant) {
	h.sems.mu.Lock()
	h.sems.grants = append(h.sems.grants, g)
	h.sems.mu.Unlock()
}

// PermitGrants copies the permits recorded.
func (h *History) PermitGrants() []PermitGrant {
	h.sems.mu.Lock()
	defer h.sems.mu.Unlock()
	return append([]PermitGrant(nil), h.sems.grants...)
}
