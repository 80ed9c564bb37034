package etcdgw

import (
	"context"
	"time"
)

// reap closes the sessions of leases whose TTL has passed since their
// last KeepAlive, every reapInterval, at most maxReapPerTick a tick,
// until ctx ends (the gateway's Close). Their sessions would end by
// their own leases at the cells anyway: nobody renews them.
func (t *leaseTable) reap(ctx context.Context) {
	tick := time.NewTicker(reapInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, l := range t.expired() {
			_ = t.closeSessions(ctx, l)
		}
	}
}

// expired takes out of the table the leases past their deadline, at
// most maxReapPerTick, and returns those with sessions to close.
func (t *leaseTable) expired() []*lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var out []*lease
	n := 0
	for _, l := range t.leases {
		if n >= maxReapPerTick {
			break
		}
		if now.Before(l.deadlineLocked()) {
			continue
		}
		n++
		t.dropLocked(l)
		if len(l.sessions) > 0 {
			out = append(out, l)
		}
	}
	return out
}
