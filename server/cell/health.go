package cell

import (
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/recent"
	"github.com/lockservice/lockd/server/fsm"
)

// HealthSpan is the span the replica's recent figures cover: a commit
// p99 and an expiry count over the last minute.
const HealthSpan = time.Minute

// recentState is a replica's soft record for the health assessment:
// its recent commits' latencies and the leaders it saw elected.
type recentState struct {
	commits  recent.Window // ms
	failures recent.Counter
	mu       sync.Mutex
	leaders  []api.LeaderChange // newest first, at most api.MaxLeaderChanges
}

// sawLeader records a leader change (a known leader only). The failed
// proposals counted so far were another leadership's.
func (r *recentState) sawLeader(now time.Time, term, leader uint64) {
	r.failures.Reset()
	if leader == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.leaders) > 0 && r.leaders[0].Term == term && r.leaders[0].LeaderID == leader {
		return
	}
	ch := api.LeaderChange{AtMS: now.UnixMilli(), Term: term, LeaderID: leader}
	r.leaders = append([]api.LeaderChange{ch}, r.leaders[:min(len(r.leaders), api.MaxLeaderChanges-1)]...)
}

func (r *recentState) leaderChanges() []api.LeaderChange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]api.LeaderChange(nil), r.leaders...)
}

// healthState is what a status read takes from the state for health.
type healthState struct {
	staged []api.StagedCopy
	usage  []api.TenantUsage
}

// statusState is a status's one read of the state: its figures and its
// health's.
type statusState struct {
	stats
	health healthState
}

func statusOf(s *fsm.State) (statusState, error) {
	st, err := statsOf(s)
	return statusState{stats: st, health: healthState{staged: s.StagedCopies(), usage: s.Usages()}}, err
}

// healthStatus adds the replica's soft health figures to its status (the
// state's, staged copies and usage, come with Status's read): its leader
// changes, and the leader's commit p99, the oldest change waiting on its
// cachers and expiries only while it leads.
func (c *Cell) healthStatus(st *api.ReplicaStatus) {
	now := time.Now()
	st.LeaderChanges = c.recent.leaderChanges()
	if st.Role != "leader" {
		return
	}
	st.CommitP99MS, st.CommitsLastMinute = c.recent.commits.Quantile(now, HealthSpan, 0.99)
	st.CommitFailuresLastMinute = c.recent.failures.Sum(now, HealthSpan)
	st.OldestInvalidationMS = c.CacheCounters().OldestChange.Milliseconds()
	st.ExpiriesLastMinute = c.sessions.ExpiriesIn(now, HealthSpan)
}
