package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// FaultKind is a nemesis.
type FaultKind string

const (
	KillLeader    FaultKind = "kill-leader"    // kill -9 the cell's leader, restart it later
	KillFollower  FaultKind = "kill-follower"  // kill -9 one follower, restart it later
	KillTwo       FaultKind = "kill-two"       // kill -9 two replicas at once (a majority remains)
	KillThree     FaultKind = "kill-three"     // kill -9 three: no majority; nothing may commit until one returns
	PauseLeader   FaultKind = "pause-leader"   // SIGSTOP the leader, SIGCONT later (sometimes past the lease)
	IsolateLeader FaultKind = "isolate-leader" // cut the leader off from every other replica (netns)
	SplitCell     FaultKind = "split-2-3"      // cut the cell into two and three replicas (netns)
	KillHolder    FaultKind = "kill-holder"    // kill -9 the holder process of the takeover lock
	PauseHolder   FaultKind = "pause-holder"   // SIGSTOP the holder process past its lease, SIGCONT after the takeover
	// ReplaceReplica removes a follower's replica of the cell and adds a
	// new one on the same lockd: learner, caught up, promoted.
	ReplaceReplica FaultKind = "replace-replica"
	// MovePrefix moves the side prefix (/side) to the other cell while
	// the workload runs on /demo.
	MovePrefix FaultKind = "move-prefix"
	// KillProxy kill -9s one of the two lockproxies (half the workers send
	// through them) and restarts it later: its clients go on through the
	// other with the same sessions.
	KillProxy FaultKind = "kill-proxy"

	// The move, restore and disk nemeses (issue 23), on /side:
	// RaceMove starts two migration drivers of /side 30–90 ms apart.
	RaceMove FaultKind = "race-move"
	// KillDriver kill -9s a lockctl migrate mid-copy and resumes it with
	// two drivers at once.
	KillDriver FaultKind = "kill-driver"
	// MoveNewCell creates a cell and moves /side to it at once.
	MoveNewCell FaultKind = "move-new-cell"
	// RestoreOld restores the side cell from an older backup on the live
	// cluster (sometimes after /side moved away), then a client with the
	// directory of before tries a lock a fresh client holds.
	RestoreOld FaultKind = "restore-old"
	// SlowFsync makes a majority's fsyncs slow (proposal timeouts).
	SlowFsync FaultKind = "slow-fsync"
	// FailFsync makes one replica's fsyncs fail.
	FailFsync FaultKind = "fail-fsync"
	// MoveHeld moves /side while a lock under it is held (its holder
	// sometimes stopped) and values are cached.
	MoveHeld FaultKind = "move-held"
	// ExpireInFlight stops a holder process for its lease and resumes it
	// while its expiry is slowly committing (slow fsync everywhere).
	ExpireInFlight FaultKind = "expire-in-flight"
)

// partitionKinds need network namespaces.
var partitionKinds = map[FaultKind]bool{IsolateLeader: true, SplitCell: true}

// roundBag is one round of the schedule before shuffling: every nemesis,
// the leader and holder ones twice or more so that a run measures enough
// fail-overs and takeovers.
var roundBag = []FaultKind{
	KillLeader, KillLeader, PauseLeader, PauseLeader, IsolateLeader,
	KillFollower, KillTwo, KillThree, SplitCell,
	KillHolder, KillHolder, PauseHolder,
	ReplaceReplica, MovePrefix, KillProxy,
	RaceMove, KillDriver, MoveNewCell, RestoreOld, SlowFsync, FailFsync, MoveHeld, ExpireInFlight,
}

// OnlyKinds, if set, restricts a schedule to these nemeses (CHAOS_ONLY or
// -only: a run of the move, restore and disk nemeses alone).
var OnlyKinds map[FaultKind]bool

// Step is one fault of the schedule: what, for how long, which targets
// (Pick chooses among the candidates the cell offers when the step runs:
// the leader is whoever leads then), and the quiet gap after healing.
type Step struct {
	Kind FaultKind
	Hold time.Duration
	Long bool // pause-leader: past the lease
	Pick uint64
	Gap  time.Duration
}

func (s Step) String() string {
	long := ""
	if s.Long {
		long = " (past the lease)"
	}
	return fmt.Sprintf("%s%s for %v, pick %d, then %v quiet", s.Kind, long, s.Hold.Round(time.Millisecond), s.Pick%1000, s.Gap.Round(time.Millisecond))
}

// Label is the step's name in the report's fault counts.
func (s Step) Label() string {
	if s.Long {
		return string(s.Kind) + " (past the lease)"
	}
	return string(s.Kind)
}

// Timing scales a schedule: the longest election timeout (20 Raft ticks)
// and the session lease.
type Timing struct {
	Election time.Duration
	Lease    time.Duration
}

// Schedule is the fault schedule a seed gives: rounds of every nemesis in
// an order shuffled by the seed, with durations drawn from it. The same
// seed, timing and partition setting give the same steps. Without
// partitions (no network namespaces) the partition nemeses are left out.
func Schedule(seed int64, t Timing, partitions bool, rounds int) []Step {
	r := rand.New(rand.NewPCG(uint64(seed), 0x6c6f636b64)) // "lockd"
	E, L := t.Election, t.Lease
	u := func(lo, hi time.Duration) time.Duration { return jitter(r, lo, hi) }
	var steps []Step
	for round := 0; round < rounds; round++ {
		bag := make([]FaultKind, 0, len(roundBag))
		for _, k := range roundBag {
			if partitionKinds[k] && !partitions || OnlyKinds != nil && !OnlyKinds[k] {
				continue
			}
			bag = append(bag, k)
		}
		r.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		longPause := r.IntN(2) == 0 // of the round's two leader pauses, which is long
		pauses := 0
		for _, k := range bag {
			st := Step{Kind: k, Pick: r.Uint64(), Gap: u(E/2, E)}
			switch k {
			case KillLeader, KillFollower, KillTwo, KillProxy:
				st.Hold = u(E, 3*E)
			case KillThree:
				st.Hold = u(L/4, L/3)
			case PauseLeader:
				st.Long = (pauses == 0) == longPause
				pauses++
				if st.Long {
					st.Hold = L + u(E/2, E)
				} else {
					st.Hold = u(E, 2*E)
				}
			case IsolateLeader, SplitCell:
				st.Hold = u(2*E, 4*E)
			case PauseHolder:
				st.Hold = L + u(L/4, L/2)
			case KillHolder, ReplaceReplica, MovePrefix, RaceMove, KillDriver, MoveNewCell, RestoreOld, MoveHeld, ExpireInFlight:
				st.Hold = 0
			case SlowFsync:
				st.Hold = u(L/4, L/2)
			case FailFsync:
				st.Hold = u(E, 2*E)
			}
			steps = append(steps, st)
		}
	}
	return steps
}

// describeSchedule lists steps, one a line.
func describeSchedule(steps []Step) string {
	var b strings.Builder
	for i, s := range steps {
		fmt.Fprintf(&b, "  %3d  %s\n", i+1, s)
	}
	return b.String()
}
