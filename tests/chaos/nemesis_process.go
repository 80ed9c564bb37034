package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockservice/lockd/tests/chaos/check"
)

// The nemeses on processes and the network: kill -9 and SIGSTOP of
// replicas, cuts between their namespaces, kill -9 of a lockproxy. Each
// injects, holds for the step's Hold, and heals; one that took the leader
// has the fail-over measured (executor.measureFailover).

// whom chooses a fault's replicas among the cell's.
type whom uint8

const (
	theLeader   whom = iota + 1 // the leader alone
	oneFollower                 // one follower, by the step's pick
	anyTwo                      // two replicas by the step's pick, the leader maybe among them
)

// victims are the replicas w names among ids, by the step's pick. Pure.
func (w whom) victims(st Step, ids []int, leader int) []int {
	switch w {
	case theLeader:
		return []int{leader}
	case oneFollower:
		return pickIDs(st, 1, without(ids, leader))
	default:
		return pickIDs(st, 2, ids)
	}
}

// failoverOf is the fail-over a fault on victims makes the executor
// measure: label if the leader is among them, else none (""). Pure.
func failoverOf(label string, victims []int, leader int) string {
	if slices.Contains(victims, leader) {
		return label
	}
	return ""
}

// holdThenHeal holds an injected fault for the hold, then heals it. With
// a failover label it measures, from at, the first commit under a new
// leader, and waits for that measure before it returns heal's error.
func (n *executor) holdThenHeal(ctx context.Context, hold time.Duration, failover string, at time.Duration, heal func() error) error {
	var measured <-chan struct{}
	if failover != "" {
		measured = n.measureFailover(failover, at)
	}
	sleepCtx(ctx, hold)
	err := heal()
	if measured != nil {
		<-measured
	}
	return err
}

// killReplicas kill -9s replicas (kill-leader, kill-follower, kill-two:
// a majority remains) and restarts them after the hold.
type killReplicas struct {
	kind FaultKind
	whom whom
}

func (f killReplicas) Kind() FaultKind { return f.kind }
func (killReplicas) Needs() []need     { return []need{needLeader} }

func (f killReplicas) Inject(ctx context.Context, n *executor, st Step, on target) error {
	victims := f.whom.victims(st, n.c.IDs(), on.leader)
	err := n.kill(victims...)
	at := n.e.h.Now()
	n.count(st.Label())
	n.logf("chaos: killed %v (leader %d)", victims, on.leader)
	heal := func() error { return n.restart(victims...) }
	return errors.Join(err, n.holdThenHeal(ctx, st.Hold, failoverOf(string(st.Kind), victims, on.leader), at, heal))
}

// pauseLeader SIGSTOPs the leader and SIGCONTs it after the hold
// (sometimes past the lease: Step.Long).
type pauseLeader struct{}

func (pauseLeader) Kind() FaultKind { return PauseLeader }
func (pauseLeader) Needs() []need   { return []need{needLeader} }

func (pauseLeader) Inject(ctx context.Context, n *executor, st Step, on target) error {
	if err := n.c.Pause(on.leader); err != nil {
		return err
	}
	n.count(st.Label())
	heal := func() error { return n.c.Resume(on.leader) }
	return n.holdThenHeal(ctx, st.Hold, st.Label(), n.e.h.Now(), heal)
}

// partition cuts replicas off from the others with blackhole routes
// between their namespaces: the leader alone (isolate-leader), or two
// against three (split-2-3). The cuts are removed after the hold.
type partition struct {
	kind     FaultKind
	minority whom
}

func (f partition) Kind() FaultKind { return f.kind }
func (partition) Needs() []need     { return []need{needNetns, needLeader} }

func (f partition) Inject(ctx context.Context, n *executor, st Step, on target) error {
	ids := n.c.IDs()
	minority := f.minority.victims(st, ids, on.leader)
	var err error
	if f.minority == theLeader {
		err = n.nn.Isolate(on.leader)
	} else {
		err = n.nn.Partition(minority, without(without(ids, minority[0]), minority[1]))
	}
	at := n.e.h.Now()
	if err != nil {
		return errors.Join(err, n.nn.Heal())
	}
	n.count(st.Label())
	n.logf("chaos: cut %v off (leader %d), %d directed cuts", minority, on.leader, len(n.nn.Cuts()))
	return n.holdThenHeal(ctx, st.Hold, failoverOf(string(st.Kind), minority, on.leader), at, n.nn.Heal)
}

// killProxy kill -9s one of the lockproxies (by the step's pick) and
// restarts it after the hold: its clients go on through the other.
type killProxy struct{}

func (killProxy) Kind() FaultKind { return KillProxy }
func (killProxy) Needs() []need   { return []need{needProxies} }

func (killProxy) Inject(ctx context.Context, n *executor, st Step, _ target) error {
	p := n.proxies[st.Pick%uint64(len(n.proxies))]
	if err := p.Kill(); err != nil {
		return err
	}
	n.count(st.Label())
	n.logf("chaos: killed %s", p.Name)
	return n.holdThenHeal(ctx, st.Hold, "", 0, p.Restart)
}

// noMajority kills three replicas (kill-three): for the hold, two run
// and nothing may commit or be read (a probe TryLock must not be granted;
// the checker also goes through every call started in the window). Then
// one comes back, a majority again: commits must resume; then the other
// two.
type noMajority struct{}

func (noMajority) Kind() FaultKind { return KillThree }
func (noMajority) Needs() []need   { return nil }

func (noMajority) Inject(ctx context.Context, n *executor, st Step, _ target) error {
	// The probe's session must exist before the window: opening one needs a commit.
	sctx, scancel := n.e.callCtx()
	_, err := n.admin.Session(sctx, cellName)
	scancel()
	if err != nil {
		return fmt.Errorf("quorum probe session: %w", err)
	}
	victims := n.pick(st, 3, n.c.IDs())
	if err := n.kill(victims...); err != nil {
		return errors.Join(err, n.restart(victims...))
	}
	start := n.e.h.Now()
	n.count(st.Label())
	n.logf("chaos: killed %v: no majority for %v", victims, st.Hold)
	type result struct {
		err error
		end time.Duration
	}
	probe := make(chan result, 1)
	m := n.admin.NewMutex(quorumLock)
	go func() {
		pctx, pcancel := context.WithTimeout(ctx, st.Hold*2/3)
		defer pcancel()
		err := m.TryLock(pctx, st.Hold*2/3)
		probe <- result{err, n.e.h.Now()}
	}()
	sleepCtx(ctx, st.Hold)
	end := n.e.h.Now()
	n.e.h.AddNoQuorum(check.Window{Start: start, End: end, What: fmt.Sprintf("no majority (%v killed)", victims)})
	err = n.restart(victims[0])
	n.awaitRegain(ctx, victims[0], n.e.h.Now())
	err = errors.Join(err, n.restart(victims[1:]...))
	n.e.h.Checked("no-majority")
	select {
	case r := <-probe:
		if r.err == nil {
			if r.end < end {
				n.violation("no-majority", "TryLock of %s granted at %v with only two replicas running (window %v–%v)", quorumLock, r.end.Round(time.Millisecond), start.Round(time.Millisecond), end.Round(time.Millisecond))
			}
			uctx, ucancel := n.e.callCtx()
			_ = m.Unlock(uctx)
			ucancel()
		}
	case <-time.After(n.e.cfg.CallTimeout + 30*time.Second):
		n.logf("chaos: quorum probe did not return")
	}
	return err
}

// awaitRegain waits for the first commit once replica back, restarted at
// t, gave the cell its majority back, and records it; past the recovery
// bound, or if the replica exits, it is a liveness violation.
func (n *executor) awaitRegain(ctx context.Context, back int, t time.Duration) {
	n.e.h.Checked("liveness")
	t0 := time.Now()
	for i := 0; ; i++ {
		if e, ok := n.prober.firstAfter(t); ok {
			n.mu.Lock()
			n.regains = append(n.regains, Sample{"majority back", e - t})
			n.fences = append(n.fences, n.fenceAfter("majority back", t, e))
			n.mu.Unlock()
			n.logf("chaos: majority back: first commit %v after replica %d restarted", (e - t).Round(time.Millisecond), back)
			return
		}
		if !n.c.Running(back) {
			n.violation("liveness", "replica %d, restarted to give the cell its majority back, exited", back)
			return
		}
		if time.Since(t0) > n.e.cfg.RecoveryBound || i > 1_000_000 || ctx.Err() != nil {
			n.violation("liveness", "no commit within %v after a majority returned (replica %d restarted at %v)", n.e.cfg.RecoveryBound, back, t.Round(time.Millisecond))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
