package cachers

// The table's bounds: caps on what one session and one tenant may have
// recorded (past them a read is served uncached, never refused), and the
// sessions refused as cachers for the rest of this leadership because
// they let an invalidation go unacknowledged past its deadline.

import (
	"sort"

	"github.com/lockservice/lockd/internal/mutant"
)

// Limits caps the table; 0 is no cap.
type Limits struct {
	// PerSession bounds the paths one session is recorded as caching.
	PerSession int
	// PerTenant bounds the (path, session) entries of one tenant's
	// sessions. Sessions without a tenant have only PerSession.
	PerTenant int
	// MissesPerTenant: once this many of one tenant's sessions were
	// refused (Revoke), none of its sessions may cache under this
	// leadership, so that opening a new session for each write does not
	// renew the attack. Sessions without a tenant, and Exempt's (the
	// lockproxies' own), are refused only one by one.
	MissesPerTenant int
	Exempt          string
}

// Outcome is what Register did.
type Outcome int

const (
	// Registered: the session is recorded; the read may be cacheable.
	Registered Outcome = iota
	// Busy: a change of the path is in flight.
	Busy
	// Refused: the session may cache no more (Revoke).
	Refused
	// OverSession: the session has PerSession paths recorded.
	OverSession
	// OverTenant: the session's tenant has PerTenant entries recorded.
	OverTenant
)

// Counts are the table's refusals since it was made.
type Counts struct {
	// OverSession and OverTenant count reads served uncached at a cap.
	OverSession, OverTenant uint64
	// Revoked counts sessions refused as cachers (Revoke); Tenants the
	// tenants refused as a whole (Limits.MissesPerTenant).
	Revoked, Tenants uint64
}

// admitLocked decides whether session may record path. Re-recording a
// path it has is always admitted.
func (t *Table) admitLocked(path string, session uint64, tenant string) Outcome {
	if _, ok := t.refused[session]; ok {
		return Refused
	}
	if _, ok := t.bySession[session][path]; ok {
		return Registered
	}
	if t.lim.PerSession > 0 && len(t.bySession[session]) >= t.lim.PerSession {
		t.counts.OverSession++
		return OverSession
	}
	if known, ok := t.tenantOf[session]; ok {
		tenant = known
	}
	if t.misses[tenant] >= t.lim.MissesPerTenant && t.lim.MissesPerTenant > 0 && !mutant.On(mutant.TenantMisses) {
		return Refused
	}
	if t.lim.PerTenant > 0 && tenant != "" && t.perTenant[tenant] >= t.lim.PerTenant {
		t.counts.OverTenant++
		return OverTenant
	}
	return Registered
}

// countLocked adds d to the entries of session's tenant.
func (t *Table) countLocked(session uint64, d int) {
	tenant := t.tenantOf[session]
	if tenant == "" {
		return
	}
	if t.perTenant[tenant] += d; t.perTenant[tenant] <= 0 {
		delete(t.perTenant, tenant)
	}
}

// Revoke refuses session as a cacher for the rest of this leadership
// (and its tenant, at its Limits.MissesPerTenant-th) and returns the paths it may still hold in its cache: those recorded
// and those changes in flight are invalidating, sorted. The caller sends
// it an invalidation of each (and waits for them like any other before
// a change of one of them commits: the entries stay recorded until a
// change takes them or the session ends). first is false, and paths nil,
// if it was refused already.
func (t *Table) Revoke(session uint64) (paths []string, first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.refused[session]; ok {
		return nil, false
	}
	t.refused[session] = struct{}{}
	t.counts.Revoked++
	if tenant := t.tenantOf[session]; tenant != "" && tenant != t.lim.Exempt {
		if t.misses[tenant]++; t.misses[tenant] == t.lim.MissesPerTenant {
			t.counts.Tenants++
		}
	}
	for p := range t.bySession[session] {
		paths = append(paths, p)
	}
	for p, m := range t.inflight {
		if _, held := t.bySession[session][p]; m[session] > 0 && !held {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	return paths, true
}

// Counts reports the table's refusals.
func (t *Table) Counts() Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts
}

// Usage reports the paths session has recorded and the entries of
// tenant's sessions.
func (t *Table) Usage(session uint64, tenant string) (paths, tenantEntries int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.bySession[session]), t.perTenant[tenant]
}
