package health

import (
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

var t0 = time.Unix(1_800_000_000, 0)

// cluster is a directory of one five-replica cell on lockds 1–5 and the
// lockds' answers: every replica up, lockd 1 leading at term 7.
func cluster() Input {
	dir := api.DirectoryResponse{Index: 40}
	cell := api.CellInfo{Name: "payments", Prefixes: []string{"/payments"}}
	zones := []string{"a", "a", "b", "b", "c"}
	var lockds []api.LockdStatus
	for i := uint64(1); i <= 5; i++ {
		dir.Lockds = append(dir.Lockds, api.LockdInfo{ID: i, APIAddr: addr(i), Zone: zones[i-1]})
		cell.Replicas = append(cell.Replicas, api.ReplicaInfo{ReplicaID: 10 + i, Lockd: i, Zone: zones[i-1]})
		role := "follower"
		if i == 1 {
			role = "leader"
		}
		rs := api.ReplicaStatus{Cell: "payments", ReplicaID: 10 + i, Role: role, LeaderID: 11, Term: 7, AppliedIndex: 100, Sessions: 200, Nodes: 900, TokenHeadroom: 1 << 39,
			LeaderChanges: []api.LeaderChange{{AtMS: t0.UnixMilli() - 60_000, Term: 7, LeaderID: 11}}}
		st := &api.StatusResponse{Version: "v1", ReplicaID: i, APIAddr: addr(i), Zone: zones[i-1], Cells: []api.ReplicaStatus{rs}, FsyncP99MS: 2,
			DirectoryReplica: i <= 3, DirectoryLeader: 2}
		lockds = append(lockds, api.LockdStatus{ID: i, APIAddr: addr(i), Zone: zones[i-1], Status: st})
	}
	dir.Cells = []api.CellInfo{cell}
	dir.Prefixes = []api.PrefixInfo{{Prefix: "/payments", Cell: "payments", Epoch: 3}}
	return Input{Now: t0, Self: addr(1), Dir: dir, Lockds: lockds, LastAnswered: map[uint64]time.Time{1: t0, 2: t0, 3: t0, 4: t0, 5: t0}}
}

func addr(i uint64) string { return "127.0.0.1:700" + string(rune('0'+i)) }

func down(in *Input, ids ...uint64) {
	for _, id := range ids {
		in.Lockds[id-1].Status, in.Lockds[id-1].Error = nil, "unavailable: connection refused"
	}
}

func leader(in *Input) *api.ReplicaStatus { return &in.Lockds[0].Status.Cells[0] }

// stall puts lockd id's replica 76 entries behind the leader, where it
// has been for d.
func stall(in *Input, id uint64, d time.Duration) {
	leader(in).AppliedIndex = 176
	if in.AppliedSince == nil {
		in.AppliedSince = map[ReplicaKey]time.Time{}
	}
	in.AppliedSince[ReplicaKey{Cell: "payments", Lockd: id}] = t0.Add(-d)
	for i := range in.Lockds {
		if _, stalled := in.AppliedSince[ReplicaKey{Cell: "payments", Lockd: in.Lockds[i].ID}]; !stalled {
			in.Lockds[i].Status.Cells[0].AppliedIndex = 176 // caught up
		} else {
			in.Lockds[i].Status.Cells[0].AppliedIndex = 100
		}
	}
}

// slowDisk gives lockd id's fsync probe a p99 and slow probes of all.
func slowDisk(in *Input, id uint64, p99 float64, slow, all int) {
	st := in.Lockds[id-1].Status
	st.FsyncP99MS, st.FsyncSlowProbes, st.FsyncProbes = p99, slow, all
}

func TestAssess(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Input)
		level api.HealthLevel // the cell's
		codes []string        // the problems' codes, worst first
	}{
		{"healthy", func(*Input) {}, api.HealthOK, nil},
		{"one replica down", func(in *Input) { down(in, 5) }, api.HealthDegraded, []string{api.ReasonReplicaDown, api.ReasonLockdDown}},
		{"two down: one loss from stopping", func(in *Input) { down(in, 4, 5) }, api.HealthCritical,
			[]string{api.ReasonQuorumAtRisk, api.ReasonReplicaDown, api.ReasonLockdDown, api.ReasonLockdDown}},
		{"three down: no quorum", func(in *Input) { down(in, 3, 4, 5) }, api.HealthCritical,
			[]string{api.ReasonNoQuorum, api.ReasonReplicaDown, api.ReasonLockdDown, api.ReasonLockdDown, api.ReasonLockdDown}},
		{"a follower a term behind is not up", func(in *Input) { in.Lockds[4].Status.Cells[0].Term = 6 }, api.HealthDegraded, []string{api.ReasonReplicaDown}},
		{"no leader, all answer: an election", func(in *Input) { leader(in).Role = "follower" }, api.HealthCritical, []string{api.ReasonNoLeader}},
		{"no leader, two answer", func(in *Input) { leader(in).Role = "follower"; down(in, 3, 4, 5) }, api.HealthCritical,
			[]string{api.ReasonNoLeader, api.ReasonNoQuorum, api.ReasonLockdDown, api.ReasonLockdDown, api.ReasonLockdDown}},
		{"nobody answers: as critical as no quorum", func(in *Input) { down(in, 1, 2, 3, 4, 5) }, api.HealthCritical,
			[]string{api.ReasonNoLeader, api.ReasonLockdDown, api.ReasonLockdDown, api.ReasonLockdDown, api.ReasonLockdDown, api.ReasonLockdDown}},
		{"a follower frozen behind the leader", func(in *Input) { stall(in, 5, ReplicaStalledAfter) }, api.HealthDegraded, []string{api.ReasonReplicaStalled}},
		{"two frozen: one loss from stopping", func(in *Input) { stall(in, 4, ReplicaStalledAfter); stall(in, 5, time.Minute) }, api.HealthCritical,
			[]string{api.ReasonQuorumAtRisk, api.ReasonReplicaStalled, api.ReasonReplicaStalled}},
		{"behind but moving is following", func(in *Input) { stall(in, 5, ReplicaStalledAfter-time.Second) }, api.HealthOK, nil},
		{"slow disk on a follower", func(in *Input) { slowDisk(in, 4, 25, 10, 60) }, api.HealthDegraded, []string{api.ReasonFsyncSlow}},
		{"one slow probe in a minute is noise", func(in *Input) { slowDisk(in, 4, 25, 1, 60) }, api.HealthOK, nil},
		{"fsync at the warning is fine", func(in *Input) { slowDisk(in, 4, FsyncWarnMS, 0, 60) }, api.HealthOK, nil},
		{"fsync probes failing", func(in *Input) { in.Lockds[3].Status.FsyncFailures = 40 }, api.HealthDegraded, []string{api.ReasonFsyncFailing}},
		{"fsync probe hung", func(in *Input) { in.Lockds[3].Status.FsyncProbeAgeMS = 30_000 }, api.HealthDegraded, []string{api.ReasonFsyncFailing}},
		{"slow commits", func(in *Input) { leader(in).CommitP99MS, leader(in).CommitsLastMinute = 80, 500 }, api.HealthDegraded, []string{api.ReasonCommitSlow}},
		{"a few slow commits after an election", func(in *Input) { leader(in).CommitP99MS, leader(in).CommitsLastMinute = 80, 5 }, api.HealthOK, nil},
		{"proposals failing", func(in *Input) { leader(in).CommitFailuresLastMinute = 30 }, api.HealthDegraded, []string{api.ReasonCommitsFailing}},
		{"token space used up", func(in *Input) { leader(in).TokenHeadroom = 0 }, api.HealthCritical, []string{api.ReasonTokenHeadroom}},
		{"stuck invalidation", func(in *Input) { leader(in).OldestInvalidationMS = 4000 }, api.HealthDegraded, []string{api.ReasonInvalidationStuck}},
		{"mass expiry", func(in *Input) { leader(in).ExpiriesLastMinute = 50 }, api.HealthDegraded, []string{api.ReasonExpiries}},
		{"churn is not a mass expiry", func(in *Input) { leader(in).ExpiriesLastMinute = 5 }, api.HealthOK, nil},
		{"sessions near the cell's limit", func(in *Input) { leader(in).Sessions = api.MaxSessionsPerCell }, api.HealthDegraded, []string{api.ReasonSessionsNearLimit}},
		{"token headroom low", func(in *Input) { leader(in).TokenHeadroom = 1000 }, api.HealthDegraded, []string{api.ReasonTokenHeadroom}},
		{"directory without a leader", func(in *Input) {
			for _, l := range in.Lockds {
				l.Status.DirectoryLeader = 0
			}
		}, api.HealthOK, []string{api.ReasonNoLeader}},
		{"move stuck", func(in *Input) {
			in.Dir.Prefixes[0].Migration = &api.Migration{From: "payments", To: "orders", Phase: api.MigrationSealing, BeganAt: 30}
			in.MoveSeen = map[string]time.Time{"/payments": t0.Add(-MoveStuckAfter - time.Second)}
		}, api.HealthOK, []string{api.ReasonMoveStuck}},
		{"move in flight", func(in *Input) {
			in.Dir.Prefixes[0].Migration = &api.Migration{From: "payments", To: "orders", Phase: api.MigrationSealing, BeganAt: 30}
			in.MoveSeen = map[string]time.Time{"/payments": t0.Add(-time.Second)}
		}, api.HealthOK, nil},
		{"proxy down", func(in *Input) { in.Proxies = []api.ProxyHealth{{APIAddr: "127.0.0.1:7201", Error: "unavailable"}} }, api.HealthOK, []string{api.ReasonProxyDown}},
		{"proxy never had a batch confirmed", func(in *Input) {
			in.Proxies = []api.ProxyHealth{{APIAddr: "127.0.0.1:7201", Cells: []api.ProxyCellStatus{{Cell: "payments", Sessions: 500, LastBatchAgeMS: -1}}}}
			in.UnconfirmedSince = map[string]time.Time{ProxyCellKey("127.0.0.1:7201", "payments"): t0.Add(-ProxyBatchLate - time.Second)}
		}, api.HealthOK, []string{api.ReasonProxyBehind}},
		{"proxy's first batch on its way", func(in *Input) {
			in.Proxies = []api.ProxyHealth{{APIAddr: "127.0.0.1:7201", Cells: []api.ProxyCellStatus{{Cell: "payments", Sessions: 500, LastBatchAgeMS: -1}}}}
			in.UnconfirmedSince = map[string]time.Time{ProxyCellKey("127.0.0.1:7201", "payments"): t0.Add(-time.Second)}
		}, api.HealthOK, nil},
		{"proxy batches late", func(in *Input) {
			in.Proxies = []api.ProxyHealth{{APIAddr: "127.0.0.1:7201", Cells: []api.ProxyCellStatus{{Cell: "payments", Sessions: 3, LastBatchAgeMS: 9000}}}}
		}, api.HealthOK, []string{api.ReasonProxyBehind}},
		{"tenant near its quota", func(in *Input) {
			in.Dir.Tenants = []api.Tenant{{Name: "web", Quota: api.Quota{Nodes: 100}}}
			leader(in).Usage = []api.TenantUsage{{Tenant: "web", Nodes: 95}}
		}, api.HealthOK, []string{api.ReasonTenantQuota}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := cluster()
			c.edit(&in)
			h := Assess(in)
			if len(h.Cells) != 1 || h.Cells[0].Level != c.level {
				t.Fatalf("cell level %v, want %v (reasons %+v)", h.Cells[0].Level, c.level, h.Cells[0].Reasons)
			}
			var codes []string
			for i, p := range h.Problems {
				codes = append(codes, p.Code)
				if i > 0 && p.Level.Rank() > h.Problems[i-1].Level.Rank() {
					t.Errorf("problems not worst first: %+v", h.Problems)
				}
				if p.Message == "" || p.Subject == "" {
					t.Errorf("problem without subject or message: %+v", p)
				}
			}
			if strings.Join(codes, ",") != strings.Join(c.codes, ",") {
				t.Fatalf("problems %v, want %v: %+v", codes, c.codes, h.Problems)
			}
			want := api.HealthOK
			for _, p := range h.Problems {
				want = worse(want, p.Level)
			}
			if h.Level != worse(want, c.level) {
				t.Errorf("cluster level %v, want %v", h.Level, worse(want, c.level))
			}
		})
	}
}

func TestCellFigures(t *testing.T) {
	in := cluster()
	down(&in, 5)
	in.Lockds[3].Status.FsyncP99MS = 31
	in.Lockds[1].Status.Cells[0].LeaderChanges = []api.LeaderChange{{AtMS: t0.UnixMilli() - 50_000, Term: 7, LeaderID: 11}, {AtMS: t0.UnixMilli() - 90_000, Term: 6, LeaderID: 13}}
	in.Dir.Prefixes[0].Migration = &api.Migration{From: "payments", To: "payments", Phase: api.MigrationSealing, SealNodes: 40}
	in.Lockds[2].Status.Cells[0].Staged = []api.StagedCopy{{Prefix: "/payments", Nodes: 12}}
	h := Assess(in)
	c := h.Cells[0]
	if c.LeaderID != 1 || c.Term != 7 || c.Voters != 5 || c.VotersUp != 4 || c.Sessions != 200 || c.FsyncP99MS != 31 || c.FsyncLockd != 4 {
		t.Fatalf("cell figures: %+v", c)
	}
	if r := c.Replicas[4]; r.Lockd != 5 || r.Up || r.Role != "down" || r.Zone != "c" {
		t.Fatalf("down replica: %+v", r)
	}
	if len(c.LeaderChanges) != 2 || c.LeaderChanges[0].Term != 7 || c.LeaderChanges[0].AtMS != t0.UnixMilli()-60_000 || c.LeaderChanges[1].Lockd != 3 {
		t.Fatalf("leader changes (earliest sighting per term, newest first, lockd named): %+v", c.LeaderChanges)
	}
	if len(h.Moves) != 1 || h.Moves[0].StagedNodes != 12 || h.Moves[0].SealNodes != 40 {
		t.Fatalf("moves: %+v", h.Moves)
	}
	if l := h.Lockds[4]; l.LastAnsweredMS != 0 || l.Error == "" || h.Lockds[1].Directory != "leader" || h.Lockds[0].Directory != "replica" {
		t.Fatalf("lockds: %+v", h.Lockds)
	}
}
