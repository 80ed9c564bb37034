package etcdgw

import "sync"

// tenantCounts counts what a tenant (or a credential) holds open at this
// gateway, per kind, against each kind's named bound: watch streams per
// credential (MaxWatchStreamsPerCredential), observers, campaigners,
// keep-alive streams and watches per tenant (MaxObservers,
// MaxCampaigners, MaxKeepAliveStreamsPerTenant, MaxWatchesPerTenant).
type tenantCounts struct {
	mu sync.Mutex
	n  map[countKey]int
}

// countKind names what is counted.
type countKind uint8

const (
	countWatchStreams countKind = iota + 1
	countObservers
	countCampaigners
	countKeepAliveStreams // per tenant: MaxKeepAliveStreamsPerTenant
	countWatches          // per tenant: MaxWatchesPerTenant
	countForwards         // per tenant: MaxForwardsPerTenant (calls in flight at other gateways)
)

type countKey struct {
	kind countKind
	who  string // a credential digest or a tenant ("" with auth off)
}

func newTenantCounts() *tenantCounts { return &tenantCounts{n: make(map[countKey]int)} }

// take counts one more of kind for who unless it already holds limit.
func (c *tenantCounts) take(kind countKind, who string, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := countKey{kind: kind, who: who}
	if c.n[k] >= limit {
		return false
	}
	c.n[k]++
	return true
}

// give returns one taken.
func (c *tenantCounts) give(kind countKind, who string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := countKey{kind: kind, who: who}
	if c.n[k]--; c.n[k] <= 0 {
		delete(c.n, k)
	}
}
