package health

import (
	"sort"
	"time"

	"github.com/lockservice/lockd/api"
)

// Input is everything one assessment reads.
type Input struct {
	Now  time.Time
	Self string
	// Dir is the directory as the assessing lockd has it (tenants
	// included).
	Dir api.DirectoryResponse
	// Lockds are every lockd's answer to its status (Error when none).
	Lockds []api.LockdStatus
	// LastAnswered is when each lockd last answered the assessing one
	// (absent: never since it started).
	LastAnswered map[uint64]time.Time
	// Proxies are the registered lockproxies as they answered (Error
	// when they did not).
	Proxies []api.ProxyHealth
	// MoveSeen is when the assessing lockd first saw each prefix's move
	// in flight.
	MoveSeen map[string]time.Time
	// AppliedSince is since when the assessing lockd has seen each
	// replica at the applied index it answers now.
	AppliedSince map[ReplicaKey]time.Time
	// UnconfirmedSince is since when the assessing lockd has seen each
	// proxy's cell (ProxyCellKey) with sessions and no batch confirmed.
	UnconfirmedSince map[string]time.Time
}

// ProxyCellKey names one cell of one proxy.
func ProxyCellKey(proxy, cell string) string { return proxy + " " + cell }

// ReplicaKey names one replica: its cell and its lockd.
type ReplicaKey struct {
	Cell  string
	Lockd uint64
}

// Assess judges the cluster.
func Assess(in Input) api.ClusterHealth {
	v := newView(in)
	out := api.ClusterHealth{Self: in.Self, AtMS: in.Now.UnixMilli(), DirectoryIndex: in.Dir.Index,
		Cells: []api.CellHealth{}, Moves: []api.MoveHealth{}, Proxies: []api.ProxyHealth{}, Lockds: []api.LockdHealth{}, Tenants: []api.TenantHealth{}}
	var problems []api.HealthReason
	for _, ci := range in.Dir.Cells {
		ch := v.cell(ci)
		out.Cells = append(out.Cells, ch)
		problems = append(problems, ch.Reasons...)
	}
	problems = append(problems, v.directory()...)
	for _, pi := range in.Dir.Prefixes {
		if pi.Migration != nil {
			m, r := v.move(pi)
			out.Moves = append(out.Moves, m)
			problems = append(problems, r...)
		}
	}
	for _, l := range in.Lockds {
		lh, r := v.lockd(l)
		out.Lockds = append(out.Lockds, lh)
		problems = append(problems, r...)
	}
	for _, p := range in.Proxies {
		problems = append(problems, v.proxyReasons(p)...)
		if p.Cells == nil {
			p.Cells = []api.ProxyCellStatus{}
		}
		out.Proxies = append(out.Proxies, p)
	}
	for _, t := range in.Dir.Tenants {
		th, r := v.tenant(t)
		out.Tenants = append(out.Tenants, th)
		problems = append(problems, r...)
	}
	out.Problems = worstFirst(problems)
	out.Level = api.HealthOK
	for _, c := range out.Cells {
		out.Level = worse(out.Level, c.Level)
	}
	for _, p := range out.Problems {
		out.Level = worse(out.Level, p.Level)
	}
	return out
}

// worse is the worse of two levels.
func worse(a, b api.HealthLevel) api.HealthLevel {
	if b.Rank() > a.Rank() {
		return b
	}
	return a
}

// worstFirst orders reasons by level, worst first, then by subject and
// code (stable output for a script and a page).
func worstFirst(rs []api.HealthReason) []api.HealthReason {
	out := append([]api.HealthReason{}, rs...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Level.Rank() != b.Level.Rank() {
			return a.Level.Rank() > b.Level.Rank()
		}
		if a.Subject != b.Subject {
			return a.Subject < b.Subject
		}
		return a.Code < b.Code
	})
	return out
}

// view indexes the input: each lockd's status and each cell's replicas'.
type view struct {
	in      Input
	status  map[uint64]*api.StatusResponse
	lockds  map[uint64]api.LockdInfo
	replica map[string]map[uint64]*api.ReplicaStatus // cell → lockd → its replica's status
}

func newView(in Input) *view {
	v := &view{in: in, status: map[uint64]*api.StatusResponse{}, lockds: map[uint64]api.LockdInfo{}, replica: map[string]map[uint64]*api.ReplicaStatus{}}
	for _, l := range in.Dir.Lockds {
		v.lockds[l.ID] = l
	}
	for _, l := range in.Lockds {
		if l.Status == nil {
			continue
		}
		v.status[l.ID] = l.Status
		for i := range l.Status.Cells {
			rs := &l.Status.Cells[i]
			if v.replica[rs.Cell] == nil {
				v.replica[rs.Cell] = map[uint64]*api.ReplicaStatus{}
			}
			v.replica[rs.Cell][l.ID] = rs
		}
	}
	return v
}

func reason(level api.HealthLevel, code, subject, format string, args ...any) api.HealthReason {
	return api.HealthReason{Level: level, Code: code, Subject: subject, Message: sprintf(format, args...)}
}
