package check

import (
	"strings"
	"testing"
	"time"
)

func TestJudgeHostile(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    HostileReply
		bad  bool
	}{
		{"refused 401", HostileReply{Expect: ExpectRefused, Status: 401}, false},
		{"refused 403", HostileReply{Expect: ExpectRefused, Status: 403}, false},
		{"no answer", HostileReply{Expect: ExpectRefused, Status: 0}, false},
		{"unavailable", HostileReply{Expect: ExpectRefused, Status: 503}, false},
		{"admin route answered", HostileReply{Kind: "cred-none", Op: "admin-tenant", Expect: ExpectRefused, Status: 200, Body: []byte(`{"token":"lkd_x"}`)}, true},
		{"write answered 204", HostileReply{Expect: ExpectRefused, Status: 204}, true},
		{"directory without tenants", HostileReply{Expect: ExpectNoTenants, Status: 200, Body: []byte(`{"cells":[]}`)}, false},
		{"directory with tenants", HostileReply{Expect: ExpectNoTenants, Status: 200, Body: []byte(`{"tenants":[{"name":"a"}]}`)}, true},
		{"directory with digests", HostileReply{Expect: ExpectNoTenants, Status: 200, Body: []byte(`{"cells":[],"x":{"tokens":["ab"]}}`)}, true},
		{"own session answered", HostileReply{Expect: ExpectAny, Status: 200}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := JudgeHostile(tc.r); (got != "") != tc.bad {
				t.Fatalf("JudgeHostile = %q, want violation %v", got, tc.bad)
			}
		})
	}
}

func TestCheckHostileState(t *testing.T) {
	base := ClusterState{Tenants: []string{"a", "b"}, Prefixes: []string{"/demo", "/side"}, Cells: []string{"demo", "side"}}
	for _, tc := range []struct {
		name  string
		after func(s *ClusterState)
		want  int
	}{
		{"unchanged, in another order", func(s *ClusterState) { s.Tenants = []string{"b", "a"} }, 0},
		{"a tenant added", func(s *ClusterState) { s.Tenants = append(s.Tenants, "mallory-root admin /") }, 1},
		{"a prefix assigned", func(s *ClusterState) { s.Prefixes = append(s.Prefixes, "/mallory") }, 1},
		{"a cell created", func(s *ClusterState) { s.Cells = []string{"demo"} }, 1},
		{"a node created", func(s *ClusterState) { s.Exists = []string{"/demo/chaos/mallory-1"} }, 1},
		{"a value written", func(s *ClusterState) {
			s.Values = map[string]string{"/demo/chaos/config/k0": "mallory-3", "/k1": "config1-9"}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := base
			after.Tenants = append([]string(nil), base.Tenants...)
			tc.after(&after)
			if _, vs := CheckHostileState(base, after); len(vs) != tc.want {
				t.Fatalf("%d violations %v, want %d", len(vs), vs, tc.want)
			}
		})
	}
}

func TestCheckWriteStalls(t *testing.T) {
	s := time.Second
	outages := []Window{{Start: 10 * s, End: 12 * s}}
	for _, tc := range []struct {
		name string
		op   Op
		bad  bool
	}{
		{"fast", Op{Start: 1 * s, End: 2 * s}, false},
		{"slow during an outage", Op{Start: 8 * s, End: 15 * s}, false},
		{"slow well past an outage", Op{Start: 8 * s, End: 22 * s}, true},
		{"slow while the cell committed", Op{Worker: "config0", Kind: "config-put", Start: 20 * s, End: 26 * s}, true},
		{"slow and refused", Op{Start: 30 * s, End: 40 * s, OK: false}, true},
		{"slow, with its attempts", Op{Start: 30 * s, End: 40 * s, Detail: "2 attempts: +0s a:1 5s no reply: timeout; +5s b:1 5s 200"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, vs := CheckWriteStalls([]Op{tc.op}, outages, 5*s)
			if (len(vs) > 0) != tc.bad {
				t.Fatalf("violations %v, want %v", vs, tc.bad)
			}
			if tc.op.Detail != "" && !strings.HasSuffix(vs[0].Detail, "; "+tc.op.Detail) {
				t.Fatalf("violation %q does not say the write's attempts", vs[0].Detail)
			}
		})
	}
}

func TestSplitLatencies(t *testing.T) {
	ms := time.Millisecond
	ops := []Op{{Start: 0, End: 10 * ms}, {Start: 100 * ms, End: 400 * ms}, {Start: 150 * ms, End: 160 * ms}}
	in, out := SplitLatencies(ops, []Window{{Start: 90 * ms, End: 200 * ms}})
	if in.N != 2 || in.Max != 300 || out.N != 1 || out.Max != 10 {
		t.Fatalf("in %+v out %+v", in, out)
	}
}

// TestFencedWriteStallsDiskFault feeds checker h3 the history of make
// test's TestChaosShort failure (seed 1): side-config0's config-cas of a
// cached /side node, 2m1.37s–2m11.748s, sent as expire-in-flight made
// every replica's fsync take 1.5 s (2m1.3s until the heal at 2m5.52s).
// The demo cell's probes committed nothing 2m1.25s–2m5.966s; the side
// cell lost its leader at 2m2.9s, had none (but for 80 ms) until 2m6.59s,
// and its new leader then fenced the node. The kill-leader fence before
// ended at 1m50.441s. Counted against the probes' outage alone, the write
// stalled 5.782 s; with the disk fault's fence (diskFence: to one cache
// window after the first commit once the last slow fsync returned,
// 2m7.05s) it is within the bound. A write held past that fence by a
// cacher that never lets go is still a stall, and so is one that spans
// two fences.
func TestFencedWriteStallsDiskFault(t *testing.T) {
	ms := func(m int64) time.Duration { return time.Duration(m) * time.Millisecond }
	w := func(a, b int64) Window { return Window{Start: ms(a), End: ms(b)} }
	outages := []Window{w(121_250, 125_966)}
	killLeader := w(108_688, 110_441)
	disk := w(121_300, 128_550)  // 2m7.05s + 1.5 s
	pause := w(138_757, 140_582) // pause-leader at 2m18.757s: 325 ms + 1.5 s
	write := Op{Worker: "side-config0", Kind: "config-cas", Start: ms(121_370), End: ms(131_748)}
	for _, tc := range []struct {
		name   string
		end    int64 // the write's end, ms; 0: as it ended
		fences []Window
		bad    bool
		stall  string // the stall the violation reports, if any
	}{
		{"the probes' outage alone (before the fix)", 0, []Window{killLeader}, true, "5.782s of it"},
		{"with the disk fault's fence", 0, []Window{killLeader, disk}, false, ""},
		{"held 5 s past the disk fence", 133_600, []Window{killLeader, disk}, true, "5.05s of it"},
		{"a cacher that never lets go", 150_000, []Window{killLeader, disk}, true, "21.45s of it"},
		{"across two fences, excused one", 141_000, []Window{killLeader, disk, pause}, true, "12.45s of it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := write
			if tc.end != 0 {
				o.End = ms(tc.end)
			}
			_, vs := CheckFencedWriteStalls([]Op{o}, outages, tc.fences, 5*time.Second)
			if (len(vs) > 0) != tc.bad {
				t.Fatalf("violations %v, want a violation: %v", vs, tc.bad)
			}
			if tc.bad && !strings.Contains(vs[0].Detail, tc.stall) {
				t.Fatalf("violation %q, want %q", vs[0].Detail, tc.stall)
			}
		})
	}
}

// TestWithin: the parts of outages inside some window; none outside
// every window (the moving prefix's stall outside any fault stays a
// stall for checker h3).
func TestWithin(t *testing.T) {
	s := time.Second
	outages := []Window{{Start: 10 * s, End: 20 * s}, {Start: 40 * s, End: 45 * s}}
	faults := []Window{{Start: 5 * s, End: 12 * s}, {Start: 15 * s, End: 30 * s}}
	got := Within(outages, faults)
	if len(got) != 2 || got[0].Start != 10*s || got[0].End != 12*s || got[1].Start != 15*s || got[1].End != 20*s {
		t.Fatalf("Within: %+v", got)
	}
	stall := Op{Start: 40 * s, End: 50 * s, OK: true}
	if _, vs := CheckWriteStalls([]Op{stall}, got, 5*s); len(vs) != 1 {
		t.Fatalf("a stall outside every fault excused: %v", vs)
	}
	if _, vs := CheckWriteStalls([]Op{{Start: 9 * s, End: 18 * s, OK: true}}, got, 5*s); len(vs) != 0 {
		t.Fatalf("a write slowed by outages within faults held a stall: %v", vs)
	}
}
