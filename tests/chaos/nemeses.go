package chaos

import (
	"context"
	"errors"
	"fmt"
)

// A nemesis is one kind of fault, as etcd's robustness failpoints are:
// its name (the FaultKind the schedule draws), its preconditions (when it
// may be injected) and its injection, which holds the fault for the
// step's Hold, heals it and measures what the step is for. The executor
// has brought the cell back to health before each step, and heals
// whatever a failed injection left behind before the next one.
type nemesis interface {
	Kind() FaultKind
	// Needs are checked in order before the injection; the first unmet
	// one skips the step (logged, not counted). needLeader, if listed, is
	// resolved last and passed to Inject.
	Needs() []need
	// Inject injects the step's fault, holds it, heals it; it counts the
	// fault (executor.count) once it is in effect.
	Inject(ctx context.Context, n *executor, st Step, at target) error
}

// target is what the preconditions resolved for an injection.
type target struct {
	leader int // the demo cell's ready leader (needLeader), else 0
}

// nemeses are every nemesis of the suite, one per FaultKind.
var nemeses = []nemesis{
	killReplicas{KillLeader, theLeader}, killReplicas{KillFollower, oneFollower}, killReplicas{KillTwo, anyTwo},
	noMajority{}, pauseLeader{},
	partition{IsolateLeader, theLeader}, partition{SplitCell, anyTwo},
	holderFault{KillHolder}, holderFault{PauseHolder},
	replaceReplica{}, movePrefix{}, killProxy{},
	raceMove{}, killDriver{}, moveNewCell{}, restoreOld{},
	slowFsync{}, failFsync{}, moveHeld{}, expireInFlight{},
}

// nemesisOf returns the nemesis of a kind.
func nemesisOf(k FaultKind) (nemesis, bool) {
	for _, m := range nemeses {
		if m.Kind() == k {
			return m, true
		}
	}
	return nil, false
}

// need is a precondition of a nemesis: what the run or the cell must
// offer when its step starts.
type need uint8

const (
	needNetns       need = iota + 1 // network namespaces (root, `ip netns`): partitions
	needProxies                     // lockproxies running (-no-proxies runs none)
	needHolder                      // the takeover lock's holder process running
	needFaultsBuild                 // lockd built with lockd_faults: the fsync control files
	needBackups                     // a backup store, and no earlier restore failed
	needCellBudget                  // fewer than maxFreshCells cells created by the run
	needLeader                      // a ready leader of the demo cell, passed to the injection
)

// capabilities are what the run offers the nemeses at a step's start.
type capabilities struct {
	netns, proxies, holder, faultsBuild, backups bool
	fresh                                        int // cells move-new-cell created
}

// unmet is the first of needs that caps do not meet, as the error the
// step is skipped with; nil if every one is met. needLeader is not
// decided here: the executor asks the cell (executor.meet). Pure.
func unmet(k FaultKind, needs []need, caps capabilities) error {
	for _, nd := range needs {
		switch {
		case nd == needNetns && !caps.netns:
			return errors.New("no network namespaces: partition skipped")
		case nd == needProxies && !caps.proxies:
			return fmt.Errorf("no proxies: %s skipped", k)
		case nd == needHolder && !caps.holder:
			return errors.New("no holder process")
		case nd == needFaultsBuild && !caps.faultsBuild:
			return fmt.Errorf("%s: lockd is not a lockd_faults build", k)
		case nd == needBackups && !caps.backups:
			return fmt.Errorf("%s: no backup store, or an earlier restore failed", k)
		case nd == needCellBudget && caps.fresh >= maxFreshCells:
			return fmt.Errorf("%s: %d cells created already", k, caps.fresh)
		}
	}
	return nil
}

// capabilities reads what the run offers now.
func (n *executor) capabilities() capabilities {
	return capabilities{
		netns:       n.nn != nil,
		proxies:     len(n.proxies) > 0,
		holder:      n.holder != nil && n.holder.running(),
		faultsBuild: n.fsyncDir != "",
		backups:     n.backupDir != "" && !n.restoreErr,
		fresh:       n.fresh,
	}
}

// meet checks a nemesis's needs, the run's first, then the cell's leader.
func (n *executor) meet(m nemesis) (target, error) {
	needs := m.Needs()
	if err := unmet(m.Kind(), needs, n.capabilities()); err != nil {
		return target{}, err
	}
	var t target
	for _, nd := range needs {
		if nd == needLeader {
			leader, err := n.leader()
			if err != nil {
				return target{}, err
			}
			t.leader = leader
		}
	}
	return t, nil
}

// exec runs one step: its nemesis, if the preconditions hold.
func (n *executor) exec(ctx context.Context, st Step) error {
	m, ok := nemesisOf(st.Kind)
	if !ok {
		return fmt.Errorf("unknown fault %q", st.Kind)
	}
	t, err := n.meet(m)
	if err != nil {
		return err
	}
	return m.Inject(ctx, n, st, t)
}
