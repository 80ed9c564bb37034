package statuspage

import (
	"fmt"
	"time"

	"github.com/lockservice/lockd/api"
)

// The fixtures: six lockds in three zones, cells demo and payments with a
// voter on each of the first five and payments a learner on the sixth,
// two lockproxies, two tenants.

func fixtureAPI(id int) string { return fmt.Sprintf("127.0.0.1:%d", 7000+id) }

func fixtureZone(id int) string { return fmt.Sprintf("z%d", (id-1)%3+1) }

// fixtureCell is a healthy cell led by lockd leader.
func fixtureCell(name string, prefixes []string, leader int, now time.Time) api.CellHealth {
	c := api.CellHealth{Cell: name, Prefixes: prefixes, Level: api.HealthOK, Reasons: []api.HealthReason{},
		LeaderID: uint64(leader), LeaderAPI: fixtureAPI(leader), Term: 7, Voters: 5, VotersUp: 5,
		Sessions: 1240, Nodes: 5310, CommitP99MS: 3.4, FsyncP99MS: 1.8, FsyncLockd: 2,
		ExpiriesPerMinute: 2, TokenHeadroom: 1 << 40}
	for id := 1; id <= 5; id++ {
		role := "follower"
		if id == leader {
			role = "leader"
		}
		c.Replicas = append(c.Replicas, api.CellReplicaHealth{Lockd: uint64(id), Zone: fixtureZone(id), Role: role, Up: true, Term: 7, Applied: 90412})
	}
	c.LeaderChanges = []api.LeaderChange{
		{AtMS: now.Add(-2*time.Minute - 5*time.Second).UnixMilli(), Term: 7, LeaderID: uint64(leader), Lockd: uint64(leader)},
		{AtMS: now.Add(-3 * time.Hour).UnixMilli(), Term: 6, LeaderID: 1, Lockd: 1},
	}
	return c
}

func fixtureProxy(port int) api.ProxyHealth {
	return api.ProxyHealth{APIAddr: fmt.Sprintf("127.0.0.1:%d", port), Zone: "z1", Version: "v1.4.0", Clients: 31, Sessions: 1800,
		Cells: []api.ProxyCellStatus{{Cell: "demo", Sessions: 1000, LastBatchAgeMS: 420}, {Cell: "payments", Sessions: 800, LastBatchAgeMS: 380}}}
}

func healthyFixture(now time.Time) api.ClusterHealth {
	h := api.ClusterHealth{Self: fixtureAPI(1), AtMS: now.UnixMilli(), Level: api.HealthOK,
		Problems: []api.HealthReason{}, DirectoryIndex: 812, Moves: []api.MoveHealth{},
		Cells:   []api.CellHealth{fixtureCell("demo", []string{"/demo"}, 2, now), fixtureCell("payments", []string{"/payments", "/orders"}, 3, now)},
		Proxies: []api.ProxyHealth{fixtureProxy(7201), fixtureProxy(7202)}}
	pay := &h.Cells[1]
	pay.Replicas = append(pay.Replicas, api.CellReplicaHealth{Lockd: 6, Zone: fixtureZone(6), Learner: true, Role: "follower", Up: true, Term: 7, Applied: 90410})
	for id := 1; id <= 6; id++ {
		dir := "replica"
		if id == 1 {
			dir = "leader"
		}
		h.Lockds = append(h.Lockds, api.LockdHealth{ID: uint64(id), APIAddr: fixtureAPI(id), Zone: fixtureZone(id), Version: "v1.4.0",
			Directory: dir, Replicas: 2, LastAnsweredMS: 300, FsyncP99MS: 1.2})
	}
	h.Lockds[5].Directory, h.Lockds[5].Replicas = "", 1
	h.Tenants = []api.TenantHealth{
		{Name: "web", Quota: api.Quota{Sessions: 2000, Nodes: 10000, Bytes: 64 << 20}.Effective(),
			Cells: []api.TenantCellUsage{{Cell: "demo", Sessions: 420, Nodes: 2100, Bytes: 3 << 20}}},
		{Name: "batch", Quota: api.Quota{}.Effective(), Cells: []api.TenantCellUsage{}},
	}
	return h
}

// The degraded fixture's problems, as the server words them.
var (
	reasonReplicaDown = api.HealthReason{Level: api.HealthDegraded, Code: api.ReasonReplicaDown, Subject: "cell payments",
		Message: "replica on lockd 4 not following the leader (down, or behind a term)"}
	reasonFsyncSlow = api.HealthReason{Level: api.HealthDegraded, Code: api.ReasonFsyncSlow, Subject: "cell payments",
		Message: "fsync p99 214.0 ms on lockd 3 (the spec warns at 10 ms)"}
	reasonLockdDown = api.HealthReason{Level: api.HealthDegraded, Code: api.ReasonLockdDown, Subject: "lockd 4",
		Message: "127.0.0.1:7004 does not answer (last answered 42s ago): connection refused"}
	// The proxy's error carries markup: the page must show it as text.
	proxyError      = `dial tcp 127.0.0.1:7202: connect: connection refused <img src=x onerror="document.title='pwned'">`
	reasonProxyDown = api.HealthReason{Level: api.HealthDegraded, Code: api.ReasonProxyDown, Subject: "proxy 127.0.0.1:7202",
		Message: "does not answer: " + proxyError + " (its clients' sessions expire unless they fail over)"}
)

// degradedFixture: lockd 4 down (its replicas of both cells), lockd 3's
// disk slow, /orders moving from payments to demo (120 of 400 nodes
// staged), proxy 127.0.0.1:7202 unreachable.
func degradedFixture(now time.Time) api.ClusterHealth {
	h := healthyFixture(now)
	h.Level = api.HealthDegraded
	for i := range h.Cells {
		c := &h.Cells[i]
		c.Level, c.VotersUp = api.HealthDegraded, 4
		r := &c.Replicas[3]
		r.Role, r.Up, r.Term, r.Applied = "down", false, 0, 0
		down := reasonReplicaDown
		down.Subject = "cell " + c.Cell
		c.Reasons = append(c.Reasons, down)
		h.Problems = append(h.Problems, down)
	}
	h.Problems = append(h.Problems, reasonFsyncSlow, reasonLockdDown, reasonProxyDown)
	pay := &h.Cells[1]
	pay.FsyncP99MS, pay.FsyncLockd = 214, 3
	pay.Reasons = append(pay.Reasons, reasonFsyncSlow)
	h.Moves = []api.MoveHealth{
		{Prefix: "/orders", From: "payments", To: "demo", Phase: api.MigrationSealing, BeganAt: 790, SealNodes: 400, StagedNodes: 120, AgeMS: 95_000},
		{Prefix: "/archive", From: "demo", To: "payments", Phase: api.MigrationSealing, BeganAt: 805, StagedNodes: -1, AgeMS: 4_000},
	}
	h.Proxies[1] = api.ProxyHealth{APIAddr: "127.0.0.1:7202", Cells: []api.ProxyCellStatus{}, Error: proxyError}
	l := &h.Lockds[3]
	l.Version, l.Directory, l.Replicas, l.FsyncP99MS = "", "", 0, 0
	l.LastAnsweredMS, l.Error = 42_000, "Get \"http://127.0.0.1:7004/v1/status\": connection refused"
	h.Lockds[2].FsyncP99MS = 214
	// lockd 6 joined while the assessing lockd was down: never answered.
	l = &h.Lockds[5]
	l.Version, l.Replicas, l.LastAnsweredMS, l.Error = "", 0, -1, "context deadline exceeded"
	h.Problems = append(h.Problems, api.HealthReason{Level: api.HealthDegraded, Code: api.ReasonLockdDown, Subject: "lockd 6",
		Message: "127.0.0.1:7006 does not answer (never since this lockd started): context deadline exceeded"})
	return h
}
