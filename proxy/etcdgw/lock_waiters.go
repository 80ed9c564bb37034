package etcdgw

import (
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MaxLockWaitersTotal bounds the Lock calls waiting at once at one
// gateway, every tenant's: sixteen tenants at MaxLockWaiters.
const MaxLockWaitersTotal = 16 * MaxLockWaiters

// lockWaiters counts the Lock calls in progress, per tenant: a tenant
// at MaxLockWaiters is refused, another tenant is not.
type lockWaiters struct {
	mu    sync.Mutex
	n     map[string]int
	total int
}

// enter admits one Lock of tenant; release undoes it.
func (lw *lockWaiters) enter(tenant string) (release func(), err error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.n == nil {
		lw.n = map[string]int{}
	}
	if lw.n[tenant] >= MaxLockWaiters {
		return nil, status.Errorf(codes.ResourceExhausted, "lockd etcd gateway: MaxLockWaiters (%d Lock calls of one tenant waiting at once) reached", MaxLockWaiters)
	}
	if lw.total >= MaxLockWaitersTotal {
		return nil, errTooMany("MaxLockWaitersTotal", MaxLockWaitersTotal, "Lock calls waiting at this gateway")
	}
	lw.n[tenant]++
	lw.total++
	return func() {
		lw.mu.Lock()
		defer lw.mu.Unlock()
		lw.total--
		if lw.n[tenant]--; lw.n[tenant] <= 0 {
			delete(lw.n, tenant)
		}
	}, nil
}

// tenantOf is the caller's tenant ("" with auth off).
func tenantOf(w who) string {
	if w.caller == nil {
		return ""
	}
	return w.caller.Tenant()
}
