package main

import (
	"slices"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// The proxy scenario's KeepAlive senders: one per session up to the
// bound. With more workers than sessions, the idle ones looped without
// waiting and spun a core (fewer than 1024 sessions).
func TestKeepAliveWorkers(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 0}, {-1, 0}, {1, 1}, {10, 10}, {1023, 1023}, {1024, 1024}, {100_000, maxKeepAliveWorkers},
	} {
		if got := keepAliveWorkers(tc.n); got != tc.want {
			t.Errorf("keepAliveWorkers(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// Every path the flood's tenants touch lies inside their own grant, under
// the grant root the admin creates first (make_parents may create nothing
// above a grant: on a fresh cluster the tenants' first writes were
// refused).
func TestFloodPathsInsideGrants(t *testing.T) {
	const base = "/demo/lockbench/run1"
	tenants := floodTenantSpecs(base, "quiet-run1", "noisy-run1", 0)
	if len(tenants) != 2 {
		t.Fatalf("%d tenants, want 2", len(tenants))
	}
	quiet, noisy := tenants[0], tenants[1]
	for _, tc := range []struct {
		tenant api.Tenant
		role   api.Role
		path   string
	}{
		{quiet, api.RoleLock, quietLockPath(base)},
		{noisy, api.RoleWrite, noisyPath(base, 63, 1000)},
	} {
		root, ok := tc.tenant.GrantRoot(tc.role, tc.path)
		if !ok || !tc.tenant.Allows(tc.role, tc.path) {
			t.Fatalf("%s may not %s %s", tc.tenant.Name, tc.role, tc.path)
		}
		if !slices.Contains(grantRoots(tenants), root) || !api.Covers(base, root) || root == base {
			t.Errorf("%s: grant root %s: want one below %s that the admin creates (%v)", tc.tenant.Name, root, base, grantRoots(tenants))
		}
		if err := tc.tenant.Validate(); err != nil {
			t.Errorf("%s: %v", tc.tenant.Name, err)
		}
	}
	if noisy.Allows(api.RoleWrite, quietLockPath(base)) {
		t.Error("the noisy tenant may write the quiet one's lock")
	}
}

// Every admin client of a run carries the run's token: the cache
// scenario's writer had none on a cluster that requires tokens.
func TestClientsCarryTheToken(t *testing.T) {
	e := &env{endpoints: []string{"127.0.0.1:7001"}, adminToken: "secret", viaProxies: true}
	for name, cfg := range map[string]struct {
		token           string
		direct, noCache bool
	}{
		"env":          {e.config().AuthToken, e.config().Direct, e.config().NoCache},
		"cache writer": {writerConfig(e).AuthToken, writerConfig(e).Direct, writerConfig(e).NoCache},
	} {
		if cfg.token != "secret" || cfg.direct {
			t.Errorf("%s: token %q direct %v; want the admin token, through the proxies", name, cfg.token, cfg.direct)
		}
		if name == "cache writer" && !cfg.noCache {
			t.Errorf("the cache writer caches")
		}
	}
}

// The proxy scenario's false expiries are judged on the lease as the
// replies date it (the sdk's confirmedSend) and on when the verdict came.
// The simulator counted an expiry false when the KeepAlive that got it was
// sent under a lease after the last successful one's send, ignoring the
// reply's lease age: a reply given before its batch was confirmed (at
// about lease/6) dates the lease from an earlier KeepAlive, often a lease
// or more back when the simulator fell behind, and 413–539 of the 10 000
// sessions' expiries were counted false although none came while the lease
// the replies confirmed still ran.
func TestProxyFalseExpiryJudgedOnConfirmedLease(t *testing.T) {
	const lease = 12 * time.Second
	t0 := time.Unix(1_000_000, 0)
	cases := []struct {
		name    string
		ageMS   int64         // the last successful reply's lease age
		told    time.Duration // when the expiry came, after t0
		isFalse bool
	}{
		// The reply said the lease began 15.6 s before the send: it had
		// run out; an expiry 5 s later is the simulator's lateness.
		{"stale reply", 15_600, 5 * time.Second, false},
		// Confirmed from 3 s before the send: over at t0+9 s.
		{"aged reply, told after", 3_000, 10 * time.Second, false},
		{"aged reply, told before", 3_000, 8 * time.Second, true},
		// Confirmed from its own send: the cell must keep it a lease.
		{"fresh reply, told within", 0, 11 * time.Second, true},
		// A KeepAlive sent at t0+11.5 s cannot reach the leader in a
		// batch before t0+12 s: told at t0+13 s, not false.
		{"fresh reply, told after", 0, 13 * time.Second, false},
	}
	for _, c := range cases {
		from := confirmedFrom(t0, c.ageMS)
		if got := falseExpiry(from, lease, t0.Add(c.told)); got != c.isFalse {
			t.Errorf("%s: falseExpiry = %v, want %v", c.name, got, c.isFalse)
		}
	}
}
