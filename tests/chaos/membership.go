package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/lockservice/lockd/api"
)

// The side cell and prefix the move-prefix nemesis moves between cells.
const (
	sideCell   = "side"
	sidePrefix = "/side"
)

// replaceReplica removes a follower's replica of the cell and adds a new
// one (a new replica id) on the same lockd: as a learner, caught up, then
// promoted. The workload runs on; every checker must still pass, and a
// change on a healthy cell must go through.
type replaceReplica struct{}

func (replaceReplica) Kind() FaultKind { return ReplaceReplica }
func (replaceReplica) Needs() []need   { return []need{needLeader} }

func (replaceReplica) Inject(ctx context.Context, n *executor, st Step, on target) error {
	victim := oneFollower.victims(st, n.c.IDs(), on.leader)[0]
	n.count(st.Label())
	n.e.h.Checked("membership")
	for _, step := range []api.MemberRequest{
		{Cell: cellName, Action: api.MemberRemove, Lockd: uint64(victim)},
		{Cell: cellName, Action: api.MemberAdd, Lockd: uint64(victim), Learner: true},
		{Cell: cellName, Action: api.MemberPromote, Lockd: uint64(victim)},
	} {
		if step.Action == api.MemberPromote {
			if err := n.waitCaughtUp(ctx, victim); err != nil {
				n.violation("membership", "the new replica on lockd %d: %v", victim, err)
				return err
			}
		}
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		info, err := n.admin.ChangeMember(mctx, step)
		cancel()
		if err != nil {
			n.violation("membership", "%s of lockd %d's replica on a healthy cell: %v", step.Action, victim, err)
			return err
		}
		n.logf("chaos: %s of lockd %d's replica: %d replicas", step.Action, victim, len(info.Replicas))
	}
	return nil
}

// waitCaughtUp waits until lockd id's replica of the cell has applied what
// the leader had when it started.
func (n *executor) waitCaughtUp(ctx context.Context, id int) error {
	var target uint64
	for i := 0; i < 3000; i++ {
		sctx, cancel := n.e.callCtx()
		sts := n.c.Statuses(sctx)
		cancel()
		var mine uint64
		for lid, s := range sts {
			for _, rs := range s.Cells {
				if rs.Cell != cellName {
					continue
				}
				if rs.Role == "leader" && target == 0 {
					target = rs.AppliedIndex
				}
				if lid == id {
					mine = rs.AppliedIndex
				}
			}
		}
		if target > 0 && mine >= target {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not caught up to index %d within the bound", target)
}

// movePrefix moves /side to the cell that does not serve it (demo ↔
// side), with a value written before the move that must read back after
// it. The cells are the run's own: no precondition.
type movePrefix struct{}

func (movePrefix) Kind() FaultKind { return MovePrefix }
func (movePrefix) Needs() []need   { return nil }

func (movePrefix) Inject(ctx context.Context, n *executor, _ Step, _ target) error {
	n.count(string(MovePrefix))
	n.e.h.Checked("migration")
	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := n.admin.RefreshDirectory(mctx); err != nil {
		return err
	}
	pi, ok := n.admin.Directory().Prefix(sidePrefix)
	if !ok {
		n.violation("migration", "%s is not in the directory", sidePrefix)
		return nil
	}
	to := sideCell
	if pi.Cell == sideCell {
		to = cellName
	}
	want := fmt.Sprintf("before move %d", pi.Epoch)
	if _, err := n.admin.Put(mctx, sidePrefix+"/v", []byte(want)); err != nil {
		return fmt.Errorf("put before the move: %w", err)
	}
	res, err := n.admin.MovePrefix(mctx, sidePrefix, to, nil)
	if err != nil {
		n.violation("migration", "move of %s to %s on a healthy cluster: %v", sidePrefix, to, err)
		return err
	}
	got, err := n.admin.Get(mctx, sidePrefix+"/v")
	switch {
	case err != nil:
		n.violation("migration", "read after the move of %s to %s: %v", sidePrefix, to, err)
	case string(got.Value) != want:
		n.violation("migration", "%s/v after the move to %s: %q, want %q", sidePrefix, to, got.Value, want)
	case res.Epoch != pi.Epoch+1:
		n.violation("migration", "%s moved to %s at epoch %d, want %d", sidePrefix, to, res.Epoch, pi.Epoch+1)
	}
	n.logf("chaos: moved %s %s → %s (epoch %d, %d nodes, writes refused %v)", sidePrefix, res.From, res.To, res.Epoch, res.Nodes, res.Refusing.Round(time.Millisecond))
	return nil
}
