package health

import (
	"fmt"
	"sort"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// cell assesses one cell from its replicas' answers.
func (v *view) cell(ci api.CellInfo) api.CellHealth {
	subject := "cell " + ci.Name
	ch := api.CellHealth{Cell: ci.Name, Prefixes: append([]string{}, ci.Prefixes...), Replicas: []api.CellReplicaHealth{},
		Reasons: []api.HealthReason{}, LeaderChanges: []api.LeaderChange{}}
	leader, leaderLockd := v.leaderOf(ci.Name)
	answered, votersAnswered := 0, 0
	for _, r := range ci.Replicas {
		rh := v.replicaHealth(ci.Name, r, leader)
		if rh.Role != "down" {
			answered++
		}
		if !r.Learner {
			ch.Voters++
			if rh.Up {
				ch.VotersUp++
			}
			if rh.Role != "down" {
				votersAnswered++
			}
		}
		ch.Replicas = append(ch.Replicas, rh)
	}
	sort.Slice(ch.Replicas, func(i, j int) bool { return ch.Replicas[i].Lockd < ch.Replicas[j].Lockd })
	ch.LeaderChanges = v.leaderChanges(ci)
	if leader == nil {
		ch.Level = api.HealthCritical
		ch.Reasons = noLeaderReasons(subject, ch, answered, votersAnswered, len(ci.Replicas))
		return ch
	}
	ch.LeaderID, ch.LeaderAPI, ch.Term = leaderLockd, v.lockds[leaderLockd].APIAddr, leader.Term
	ch.Sessions, ch.Nodes, ch.TokenHeadroom = leader.Sessions, leader.Nodes, leader.TokenHeadroom
	ch.CommitP99MS, ch.OldestInvalidationMS, ch.ExpiriesPerMinute = leader.CommitP99MS, leader.OldestInvalidationMS, leader.ExpiriesLastMinute
	ch.FsyncP99MS, ch.FsyncLockd = v.worstFsync(ch.Replicas)
	ch.Reasons = append(ch.Reasons, quorumReasons(subject, ch)...)
	ch.Reasons = append(ch.Reasons, figureReasons(subject, ch, leader)...)
	ch.Reasons = append(ch.Reasons, v.fsyncReasons(subject, ch.Replicas)...)
	ch.Level = api.HealthOK
	for _, r := range ch.Reasons {
		ch.Level = worse(ch.Level, r.Level)
	}
	return ch
}

// noLeaderReasons judges a cell no replica says it leads: an election
// in progress if a majority of voters answer, no quorum if not.
func noLeaderReasons(subject string, ch api.CellHealth, answered, votersAnswered, replicas int) []api.HealthReason {
	if answered == 0 {
		return []api.HealthReason{reason(api.HealthCritical, api.ReasonNoLeader, subject, "no replica of it answered: the cell is down, or cut off from this lockd")}
	}
	out := []api.HealthReason{reason(api.HealthCritical, api.ReasonNoLeader, subject, "no replica knows a leader (%d of %d replicas answered): an election, or no quorum", answered, replicas)}
	if majority := ch.Voters/2 + 1; votersAnswered < majority {
		out = append(out, reason(api.HealthCritical, api.ReasonNoQuorum, subject, "%d of %d voters answer, a majority needs %d: the cell cannot elect a leader", votersAnswered, ch.Voters, majority))
	}
	return out
}

// leaderOf is the status of the replica that says it leads the cell at
// the highest term, and its lockd.
func (v *view) leaderOf(cell string) (*api.ReplicaStatus, uint64) {
	var best *api.ReplicaStatus
	var lockd uint64
	for id, rs := range v.replica[cell] {
		if rs.Role == "leader" && (best == nil || rs.Term > best.Term || (rs.Term == best.Term && id < lockd)) {
			best, lockd = rs, id
		}
	}
	return best, lockd
}

// replicaHealth is one replica as its lockd answered: up when it follows
// (or is) the leader at the leader's term and has not stalled behind it.
func (v *view) replicaHealth(cell string, r api.ReplicaInfo, leader *api.ReplicaStatus) api.CellReplicaHealth {
	rh := api.CellReplicaHealth{Lockd: r.Lockd, Zone: r.Zone, Learner: r.Learner, Role: "down"}
	if rh.Zone == "" {
		rh.Zone = v.lockds[r.Lockd].Zone
	}
	rs := v.replica[cell][r.Lockd]
	if rs == nil {
		rh.Up = mutant.On(mutant.HealthBlindQuorum)
		return rh
	}
	rh.Role, rh.Term, rh.Applied = rs.Role, rs.Term, rs.AppliedIndex
	rh.Up = leader != nil && rs.Term == leader.Term && (rs.Role == "leader" || rs.Role == "follower")
	if leader != nil && rs.AppliedIndex < leader.AppliedIndex {
		rh.Behind = leader.AppliedIndex - rs.AppliedIndex
		if since, ok := v.in.AppliedSince[ReplicaKey{Cell: cell, Lockd: r.Lockd}]; ok {
			rh.StalledMS = max(v.in.Now.Sub(since), 0).Milliseconds()
		}
		if time.Duration(rh.StalledMS)*time.Millisecond >= ReplicaStalledAfter {
			rh.Up = false
		}
	}
	return rh
}

// quorumReasons judges the voters: fewer up than a majority stops the
// cell, exactly a majority is one loss from it, any down is degraded.
func quorumReasons(subject string, ch api.CellHealth) []api.HealthReason {
	var out []api.HealthReason
	majority := ch.Voters/2 + 1
	var down, stalled []uint64
	for _, r := range ch.Replicas {
		switch {
		case r.Up:
		case r.Role != "down" && time.Duration(r.StalledMS)*time.Millisecond >= ReplicaStalledAfter:
			stalled = append(stalled, r.Lockd)
		default:
			down = append(down, r.Lockd)
		}
	}
	switch {
	case ch.Voters == 0:
	case ch.VotersUp < majority:
		out = append(out, reason(api.HealthCritical, api.ReasonNoQuorum, subject, "%d of %d voters up, a majority needs %d: the cell cannot commit", ch.VotersUp, ch.Voters, majority))
	case ch.VotersUp == majority && ch.Voters > 1:
		out = append(out, reason(api.HealthCritical, api.ReasonQuorumAtRisk, subject, "%d of %d voters up: one more loss stops the cell", ch.VotersUp, ch.Voters))
	}
	if len(down) > 0 {
		out = append(out, reason(api.HealthDegraded, api.ReasonReplicaDown, subject, "replica on lockd %s not following the leader (down, or behind a term)", joinIDs(down)))
	}
	for _, id := range stalled {
		r := replicaOn(ch.Replicas, id)
		out = append(out, reason(api.HealthDegraded, api.ReasonReplicaStalled, subject, "replica on lockd %d has applied nothing for %.0f s, %d entries behind the leader (a frozen disk, or a snapshot on its way)", id, float64(r.StalledMS)/1000, r.Behind))
	}
	return out
}

func replicaOn(rs []api.CellReplicaHealth, lockd uint64) api.CellReplicaHealth {
	for _, r := range rs {
		if r.Lockd == lockd {
			return r
		}
	}
	return api.CellReplicaHealth{}
}

// figureReasons judges the leader's figures.
func figureReasons(subject string, ch api.CellHealth, leader *api.ReplicaStatus) []api.HealthReason {
	var out []api.HealthReason
	if ch.CommitP99MS > CommitWarnMS && leader.CommitsLastMinute >= CommitMinSamples {
		out = append(out, reason(api.HealthDegraded, api.ReasonCommitSlow, subject, "commit p99 %.0f ms over the last minute's %d commits (the spec's acquire p99 is %.0f ms)", ch.CommitP99MS, leader.CommitsLastMinute, CommitWarnMS))
	}
	if n := leader.CommitFailuresLastMinute; n >= CommitFailuresWarn {
		out = append(out, reason(api.HealthDegraded, api.ReasonCommitsFailing, subject, "%d proposals failed in the last minute (timed out, or lost the leadership), %d committed", n, leader.CommitsLastMinute))
	}
	if time.Duration(ch.OldestInvalidationMS)*time.Millisecond > InvalidationWarn {
		out = append(out, reason(api.HealthDegraded, api.ReasonInvalidationStuck, subject, "a change has waited %.1f s for cache acknowledgements (a cache window is %v)", float64(ch.OldestInvalidationMS)/1000, InvalidationWarn))
	}
	if ch.ExpiriesPerMinute >= ExpiriesWarnMin && float64(ch.ExpiriesPerMinute) >= ExpiriesWarnShare*float64(ch.Sessions+ch.ExpiriesPerMinute) {
		out = append(out, reason(api.HealthDegraded, api.ReasonExpiries, subject, "%d sessions expired in the last minute (%d live)", ch.ExpiriesPerMinute, ch.Sessions))
	}
	if float64(ch.Sessions) >= QuotaWarnShare*float64(api.MaxSessionsPerCell) {
		out = append(out, reason(api.HealthDegraded, api.ReasonSessionsNearLimit, subject, "%d sessions of the %d a cell holds (MaxSessionsPerCell): move a prefix to another cell", ch.Sessions, api.MaxSessionsPerCell))
	}
	switch {
	case ch.TokenHeadroom == 0 && leader.AppliedIndex > 0:
		out = append(out, reason(api.HealthCritical, api.ReasonTokenHeadroom, subject, "the fencing tokens' index bits are used up: lock creates are refused (token_exhausted); move its prefixes to a new cell"))
	case ch.TokenHeadroom > 0 && ch.TokenHeadroom < TokenHeadroomWarn:
		out = append(out, reason(api.HealthDegraded, api.ReasonTokenHeadroom, subject, "%d entries before lock creates are refused (token_exhausted): move its prefixes to a new cell", ch.TokenHeadroom))
	}
	return out
}

// worstFsync is the highest fsync p99 among the lockds of the replicas
// that answered, and which lockd.
func (v *view) worstFsync(rs []api.CellReplicaHealth) (float64, uint64) {
	var worst float64
	var at uint64
	for _, r := range rs {
		if st := v.status[r.Lockd]; st != nil && r.Role != "down" && st.FsyncP99MS > worst {
			worst, at = st.FsyncP99MS, r.Lockd
		}
	}
	return worst, at
}

// fsyncReasons judges the disks of the cell's replicas: slow when enough
// probes of the last minute passed the spec's warning (one slow probe in
// sixty is the p99, and noise), failing when probes failed or stopped.
func (v *view) fsyncReasons(subject string, rs []api.CellReplicaHealth) []api.HealthReason {
	var out []api.HealthReason
	for _, r := range rs {
		st := v.status[r.Lockd]
		if st == nil || r.Role == "down" {
			continue
		}
		slowEnough := st.FsyncSlowProbes >= FsyncSlowMin && float64(st.FsyncSlowProbes) >= FsyncSlowShare*float64(st.FsyncProbes)
		switch {
		case st.FsyncFailures > 0:
			out = append(out, reason(api.HealthDegraded, api.ReasonFsyncFailing, subject, "lockd %d: %d fsync probes failed in the last minute (its Raft log shares the disk)", r.Lockd, st.FsyncFailures))
		case time.Duration(st.FsyncProbeAgeMS)*time.Millisecond > FsyncProbeStale:
			out = append(out, reason(api.HealthDegraded, api.ReasonFsyncFailing, subject, "lockd %d: no fsync probe has completed for %.0f s (a disk that hangs)", r.Lockd, float64(st.FsyncProbeAgeMS)/1000))
		case slowEnough && st.FsyncP99MS > FsyncWarnMS:
			out = append(out, reason(api.HealthDegraded, api.ReasonFsyncSlow, subject, "fsync p99 %.1f ms on lockd %d, %d of its %d probes in the last minute over %.0f ms (the spec's warning)", st.FsyncP99MS, r.Lockd, st.FsyncSlowProbes, st.FsyncProbes, FsyncWarnMS))
		}
	}
	return out
}

// leaderChanges merges the changes every replica saw: one per term and
// leader (the earliest sighting), newest first, with the leader's lockd.
func (v *view) leaderChanges(ci api.CellInfo) []api.LeaderChange {
	lockdOf := map[uint64]uint64{}
	for _, r := range ci.Replicas {
		lockdOf[r.ReplicaID] = r.Lockd
	}
	type key struct{ term, leader uint64 }
	seen := map[key]api.LeaderChange{}
	for _, rs := range v.replica[ci.Name] {
		for _, lc := range rs.LeaderChanges {
			k := key{lc.Term, lc.LeaderID}
			if old, ok := seen[k]; !ok || lc.AtMS < old.AtMS {
				lc.Lockd = lockdOf[lc.LeaderID]
				seen[k] = lc
			}
		}
	}
	out := make([]api.LeaderChange, 0, len(seen))
	for _, lc := range seen {
		out = append(out, lc)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Term != out[j].Term {
			return out[i].Term > out[j].Term
		}
		return out[i].AtMS > out[j].AtMS
	})
	return out[:min(len(out), api.MaxLeaderChanges)]
}

func joinIDs(ids []uint64) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(id)
	}
	return s
}
