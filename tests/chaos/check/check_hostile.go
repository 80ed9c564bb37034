package check

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Expect is what a hostile request may be answered.
type Expect int

const (
	// ExpectRefused: the request lies outside the sender's grants (no,
	// empty, malformed, wrong or revoked credentials, or a reader's token
	// on a write, an admin route or a path it may not read). Any 2xx
	// answer is a violation.
	ExpectRefused Expect = iota
	// ExpectNoTenants: a tenant's directory read may succeed, but must not
	// list the tenants or their token digests (docs/api.md, "Who may call
	// what").
	ExpectNoTenants
	// ExpectAny: within the sender's grants (its own sessions, cached
	// reads and watches of paths it may read); counted, not judged.
	ExpectAny
)

// HostileReply is one hostile request and what it was answered.
type HostileReply struct {
	Kind   string // attack kind (cred-none, reader-write, ...)
	Op     string // what it tried (put-config, admin-tenant, ...)
	Target string // the lockd or lockproxy address
	Route  string
	Auth   string // how it authenticated, for the record (never a real token)
	Expect Expect
	Status int    // 0: no answer (transport error, timeout)
	Body   []byte // the answer's body (a prefix of it)
}

// JudgeHostile is checker h1 on one reply: a request outside the
// sender's grants answered 2xx, or a directory read by a tenant that
// shows tenants or token digests. It returns the violation's detail, or
// "" when the reply is acceptable.
func JudgeHostile(r HostileReply) string {
	if r.Status/100 != 2 {
		return ""
	}
	switch r.Expect {
	case ExpectRefused:
		return fmt.Sprintf("%s %s: %s %s with %s answered %d: %s", r.Kind, r.Op, r.Target, r.Route, r.Auth, r.Status, bodyExcerpt(r.Body))
	case ExpectNoTenants:
		var d struct {
			Tenants []json.RawMessage `json:"tenants"`
		}
		if json.Unmarshal(r.Body, &d) != nil {
			return ""
		}
		if len(d.Tenants) > 0 || bytes.Contains(r.Body, []byte(`"tokens"`)) {
			return fmt.Sprintf("%s %s to %s with %s listed %d tenants: %s", r.Kind, r.Op, r.Target, r.Auth, len(d.Tenants), bodyExcerpt(r.Body))
		}
	}
	return ""
}

func bodyExcerpt(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// ClusterState is what the hostile tenant must not change outside its
// grants: the tenants (name, grants, number of tokens), the prefixes and
// cells the directory knows (by name: the nemeses move a prefix between
// cells and change replicas), the nodes it tried to create, and the
// values of the nodes it tried to write.
type ClusterState struct {
	Tenants  []string
	Prefixes []string
	Cells    []string
	// Exists are paths the hostile tenant tried to create that exist.
	Exists []string
	// Values are the values of nodes it tried to write, by path.
	Values map[string]string
}

// HostileMark starts every value and name the hostile tenant writes: a
// value or node carrying it was written by the attacker.
const HostileMark = "mallory"

// CheckHostileState is checker h2: after the run, the tenants, prefixes
// and cells are as they were before the hostile tenant started (less the
// ones the run itself changed, which before already holds), none of the
// nodes it tried to create exists, and no value it tried to write is
// there.
func CheckHostileState(before, after ClusterState) (int, []Violation) {
	var vs []Violation
	add := func(format string, args ...any) {
		vs = append(vs, Violation{"hostile-state", fmt.Sprintf(format, args...)})
	}
	for _, d := range []struct {
		what          string
		before, after []string
	}{{"tenants", before.Tenants, after.Tenants}, {"prefixes", before.Prefixes, after.Prefixes}, {"cells", before.Cells, after.Cells}} {
		b, a := slices.Sorted(slices.Values(d.before)), slices.Sorted(slices.Values(d.after))
		if !slices.Equal(b, a) {
			add("%s changed: before %v, after %v", d.what, b, a)
		}
	}
	for _, p := range after.Exists {
		add("%s, which only the hostile tenant tried to create, exists", p)
	}
	for _, p := range slices.Sorted(maps.Keys(after.Values)) {
		if strings.HasPrefix(after.Values[p], HostileMark) {
			add("%s holds the hostile tenant's value %q", p, after.Values[p])
		}
	}
	return 3 + len(after.Values) + 1, vs
}

// CheckWriteStalls is checker h3: no workload write (writes: the calls
// of direct clients that write, Op.End − Op.Start their latency) took
// longer than bound beyond the time the cell itself stalled during it
// (outages: periods without any commit, from the probers). A reader that
// caches a node and never acknowledges its invalidation holds a write of
// it at most one cache window (issue 22, hole 5): bound is that window
// plus a slack for the call's own retries.
func CheckWriteStalls(writes []Op, outages []Window, bound time.Duration) (int, []Violation) {
	var vs []Violation
	for _, o := range writes {
		took := o.End - o.Start
		down := overlap(o, outages)
		if took-down <= bound {
			continue
		}
		vs = append(vs, Violation{"write-stall", fmt.Sprintf("%s %s took %v (%v–%v, ok=%v), %v of it while the cell committed: over the bound %v%s",
			o.Worker, o.Kind, took.Round(time.Millisecond), o.Start.Round(time.Millisecond), o.End.Round(time.Millisecond), o.OK, (took - down).Round(time.Millisecond), bound, detail(o))})
	}
	return len(writes), vs
}

// Within is the parts of outages that lie within some window of ws (in
// the order of outages, then of ws; they may overlap: overlap takes their
// union).
func Within(outages, ws []Window) []Window {
	var out []Window
	for _, o := range outages {
		for _, w := range ws {
			if lo, hi := max(o.Start, w.Start), min(o.End, w.End); hi > lo {
				out = append(out, Window{Start: lo, End: hi, What: o.What + " in " + w.What})
			}
		}
	}
	return out
}

// detail is o's attempts, if it kept them, after a separator.
func detail(o Op) string {
	if o.Detail == "" {
		return ""
	}
	return "; " + o.Detail
}

// overlap is how much of o's span the windows cover (they do not
// overlap each other).
func overlap(o Op, ws []Window) time.Duration {
	type span struct{ lo, hi time.Duration }
	var in []span
	for _, w := range ws {
		if lo, hi := max(w.Start, o.Start), min(w.End, o.End); hi > lo {
			in = append(in, span{lo, hi})
		}
	}
	// The union: windows that overlap (an outage inside a fence, a
	// restore across an outage) count once.
	slices.SortFunc(in, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	var d, reach time.Duration
	for _, sp := range in {
		lo := max(sp.lo, reach)
		if sp.hi > lo {
			d += sp.hi - lo
		}
		reach = max(reach, sp.hi)
	}
	return d
}

// Latencies are percentiles of a set of calls, in milliseconds.
type Latencies struct {
	N   int   `json:"n"`
	P50 int64 `json:"p50_ms"`
	P99 int64 `json:"p99_ms"`
	Max int64 `json:"max_ms"`
}

// SplitLatencies is the latency of ops that started inside one of
// windows, and of the others.
func SplitLatencies(ops []Op, windows []Window) (in, out Latencies) {
	var a, b []time.Duration
	for _, o := range ops {
		d := o.End - o.Start
		if inside(o.Start, windows) {
			a = append(a, d)
		} else {
			b = append(b, d)
		}
	}
	return latenciesOf(a), latenciesOf(b)
}

func inside(t time.Duration, ws []Window) bool {
	for _, w := range ws {
		if t >= w.Start && t < w.End {
			return true
		}
	}
	return false
}

func latenciesOf(ds []time.Duration) Latencies {
	if len(ds) == 0 {
		return Latencies{}
	}
	slices.Sort(ds)
	at := func(q float64) int64 { return ds[min(len(ds)-1, int(q*float64(len(ds))))].Milliseconds() }
	return Latencies{N: len(ds), P50: at(0.50), P99: at(0.99), Max: ds[len(ds)-1].Milliseconds()}
}

func (l Latencies) String() string {
	if l.N == 0 {
		return "no calls"
	}
	return fmt.Sprintf("n=%d p50 %d ms, p99 %d ms, max %d ms", l.N, l.P50, l.P99, l.Max)
}

// CheckFencedWriteStalls is CheckWriteStalls for writes of cached nodes:
// besides the outages, each write is excused the longest span it shares
// with one fence (a leader fault to one cache window after the new
// leader's first commit), at most one: the new leader's fence holds such a
// write by design, but a write held past that and its bound is a stall.
func CheckFencedWriteStalls(writes []Op, outages, fences []Window, bound time.Duration) (int, []Violation) {
	var vs []Violation
	for _, o := range writes {
		took := o.End - o.Start
		down := overlap(o, outages)
		for _, f := range fences {
			if f.Start < o.End && o.Start < f.End {
				down = max(down, overlap(o, append(slices.Clone(outages), f)))
			}
		}
		if took-down <= bound {
			continue
		}
		vs = append(vs, Violation{"write-stall", fmt.Sprintf("%s %s took %v (%v–%v, ok=%v), %v of it while the cell committed and past one fence: over the bound %v%s",
			o.Worker, o.Kind, took.Round(time.Millisecond), o.Start.Round(time.Millisecond), o.End.Round(time.Millisecond), o.OK, (took - down).Round(time.Millisecond), bound, detail(o))})
	}
	return len(writes), vs
}
