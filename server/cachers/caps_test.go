package cachers

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// regs are n registrations of distinct paths by session s of tenant.
type regs struct {
	s      uint64
	tenant string
	n      int
}

// Past a cap a registration is refused (the read is served uncached) and
// counted; re-registering a path the session has is never refused; the
// tenant's count follows registrations, changes and ended sessions.
func TestCaps(t *testing.T) {
	for _, tc := range []struct {
		name       string
		lim        Limits
		regs       []regs
		want       Outcome // of one more registration of a new path by the last session
		over       Counts
		sessionLen int // the last session's recorded paths
	}{
		{name: "under every cap", lim: Limits{PerSession: 3, PerTenant: 5},
			regs: []regs{{1, "a", 2}}, want: Registered, sessionLen: 3},
		{name: "session cap", lim: Limits{PerSession: 3, PerTenant: 100},
			regs: []regs{{1, "a", 3}}, want: OverSession, over: Counts{OverSession: 1}, sessionLen: 3},
		{name: "tenant cap across sessions", lim: Limits{PerSession: 10, PerTenant: 5},
			regs: []regs{{1, "a", 3}, {2, "a", 2}}, want: OverTenant, over: Counts{OverTenant: 1}, sessionLen: 2},
		{name: "another tenant is not counted", lim: Limits{PerSession: 10, PerTenant: 5},
			regs: []regs{{1, "a", 5}, {2, "b", 2}}, want: Registered, sessionLen: 3},
		{name: "no tenant: the session cap only", lim: Limits{PerSession: 10, PerTenant: 2},
			regs: []regs{{1, "", 5}, {2, "", 5}}, want: Registered, sessionLen: 6},
		{name: "no caps", lim: Limits{},
			regs: []regs{{1, "a", 50}}, want: Registered, sessionLen: 51},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := NewWithLimits(tc.lim)
			var last uint64
			var tenant string
			for _, r := range tc.regs {
				for i := 0; i < r.n; i++ {
					if o := tb.Register(fmt.Sprintf("/demo/s%d/%d", r.s, i), r.s, r.tenant); o != Registered {
						t.Fatalf("registration %d of session %d: %v", i, r.s, o)
					}
				}
				last, tenant = r.s, r.tenant
			}
			if o := tb.Register("/demo/s1/0", 1, tc.regs[0].tenant); o != Registered {
				t.Fatalf("re-registering a path the session has: %v", o)
			}
			if o := tb.Register("/demo/new", last, tenant); o != tc.want {
				t.Fatalf("one more: %v, want %v", o, tc.want)
			}
			if got := tb.Counts(); got != tc.over {
				t.Fatalf("counts %+v, want %+v", got, tc.over)
			}
			if n, _ := tb.Usage(last, tenant); n != tc.sessionLen {
				t.Fatalf("session %d has %d paths, want %d", last, n, tc.sessionLen)
			}
		})
	}
}

// The tenant's count goes down when a change takes a path and when a
// session ends, and up again when a change gives up.
func TestTenantCountFollowsTheTable(t *testing.T) {
	tb := NewWithLimits(Limits{PerSession: 10, PerTenant: 3})
	for i, s := range []uint64{1, 1, 2} {
		if o := tb.Register(fmt.Sprintf("/demo/%d", i), s, "a"); o != Registered {
			t.Fatal(o)
		}
	}
	if o := tb.Register("/demo/9", 2, "a"); o != OverTenant {
		t.Fatalf("at the tenant cap: %v", o)
	}
	_, done := tb.Begin("/demo/0", time.Unix(1, 0))
	if _, n := tb.Usage(1, "a"); n != 2 {
		t.Fatalf("tenant entries %d during a change, want 2", n)
	}
	done(false) // gave up: the cacher is recorded again
	if _, n := tb.Usage(1, "a"); n != 3 {
		t.Fatalf("tenant entries %d after a change gave up, want 3", n)
	}
	tb.Forget(1)
	if _, n := tb.Usage(1, "a"); n != 1 {
		t.Fatalf("tenant entries %d after session 1 ended, want 1", n)
	}
	if o := tb.Register("/demo/9", 2, "a"); o != Registered {
		t.Fatalf("under the cap again: %v", o)
	}
}

// A revoked session is refused for the rest of the leadership; Revoke
// returns every path it may hold, recorded or being invalidated by a
// change in flight, once; a new leadership (Reset) admits it again.
func TestRevoke(t *testing.T) {
	tb := New()
	for _, p := range []string{"/demo/a", "/demo/b", "/demo/c"} {
		reg(tb, p, 7)
	}
	reg(tb, "/demo/a", 8)
	_, done := tb.Begin("/demo/c", time.Unix(1, 0)) // claims 7's /demo/c
	paths, first := tb.Revoke(7)
	if !first || !slices.Equal(paths, []string{"/demo/a", "/demo/b", "/demo/c"}) {
		t.Fatalf("Revoke: %v first=%v", paths, first)
	}
	if again, first := tb.Revoke(7); first || again != nil {
		t.Fatalf("second Revoke: %v first=%v", again, first)
	}
	if o := tb.Register("/demo/d", 7, ""); o != Refused {
		t.Fatalf("a revoked session registered: %v", o)
	}
	if o := tb.Register("/demo/d", 8, ""); o != Registered {
		t.Fatalf("another session refused: %v", o)
	}
	done(true)
	got, done2 := tb.Begin("/demo/a", time.Unix(2, 0))
	if !slices.Equal(got, []uint64{7, 8}) {
		t.Fatalf("a revoked session's entries are still invalidated: got %v", got)
	}
	done2(true)
	if tb.Counts().Revoked != 1 {
		t.Fatalf("revoked %d, want 1", tb.Counts().Revoked)
	}
	tb.Reset()
	if o := tb.Register("/demo/d", 7, ""); o != Registered {
		t.Fatalf("refused under a new leadership: %v", o)
	}
}
