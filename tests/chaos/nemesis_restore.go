package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
	"github.com/lockservice/lockd/tests/cluster"
)

// restoreOld is the restore nemesis (findings 3 and 4), done as an
// operator does it through the product, on a live cluster: lockctl backup
// of the side cell while it serves /side; writes after the backup; on even
// picks /side then moves to demo (a client keeps the directory of before
// the move); lockctl restore plans the side cell from that backup on three
// lockds, and on each of them in turn: stop the lockd, lockd restore,
// start it. The old replicas stop when their lockds read the plan.
// Checked: at most one cell serves /side (m1, sampled), the writes after
// the backup are lost exactly when the directory still gives /side to the
// restored cell (m2), cached reads across it (c, in eras), and the stale
// client cannot lock what a fresh one holds. After a restore that could
// not be completed, no more.
type restoreOld struct{}

func (restoreOld) Kind() FaultKind { return RestoreOld }
func (restoreOld) Needs() []need   { return []need{needBackups} }

func (restoreOld) Inject(ctx context.Context, n *executor, st Step, _ target) error {
	mctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	from, _, _, err := n.sideTarget(mctx)
	if err != nil {
		return err
	}
	if from != sideCell {
		if _, err := n.admin.MovePrefix(mctx, sidePrefix, sideCell, nil); err != nil {
			return fmt.Errorf("restore-old: move %s back to %s first: %w", sidePrefix, sideCell, err)
		}
	}
	bc := n.e.h.Now()
	b, err := n.admin.Backup(mctx, sideCell)
	br := n.e.h.Now()
	if err != nil {
		return fmt.Errorf("restore-old: backup: %w", err)
	}
	n.restores++
	n.writesAfterBackup(mctx)
	stale := st.Pick%2 == 0
	var staleC *sdk.Client
	if stale {
		if staleC, err = n.staleClient(); err != nil {
			return err
		}
		defer staleC.Close()
		if _, err := n.admin.MovePrefix(mctx, sidePrefix, cellName, nil); err != nil {
			return fmt.Errorf("restore-old: move %s to %s after the backup: %w", sidePrefix, cellName, err)
		}
	}
	on := n.pick(st, 3, n.c.IDs())
	start := n.e.h.Now()
	ids := make([]uint64, len(on))
	for i, id := range on {
		ids[i] = uint64(id)
	}
	plan, err := n.admin.RestoreCell(mctx, api.RestoreCellRequest{Cell: sideCell, BackupIndex: b.Index, On: ids})
	if err != nil {
		return fmt.Errorf("restore-old: plan: %w", err)
	}
	n.count(st.Label())
	var prefixes []string
	for p := range plan.Epochs {
		prefixes = append(prefixes, p)
	}
	sort.Strings(prefixes)
	n.logf("chaos: restore-old: backup of %s at index %d; /side moved away first: %v; planned on lockds %v with prefixes %v", sideCell, b.Index, stale, on, plan.Epochs)
	n.e.h.Checked("restore")
	rerr := n.restoreOn(mctx, on)
	if rerr != nil {
		n.restoreErr = true
		n.violation("restore", "restore of %s from the backup at index %d on lockds %v: %v", sideCell, b.Index, on, rerr)
	}
	n.waitSideServed(mctx)
	end := n.e.h.Now()
	n.e.h.AddRestore(check.RestoreEvent{Cell: sideCell, Prefixes: prefixes, BackupIndex: b.Index, BackupCall: bc, BackupReturn: br, Start: start, End: end})
	n.e.h.AddOutcome(fmt.Sprintf("restore-old: prefix moved away first %v, restored cell given %v", stale, prefixes))
	if stale {
		n.staleLock(mctx, staleC)
	}
	return rerr
}

// writesAfterBackup puts a few keys after the backup: lost by a restore
// that still gives the cell /side, kept by one that does not (m2).
func (n *executor) writesAfterBackup(ctx context.Context) {
	for i := 0; i < 5; i++ {
		key := fmt.Sprintf("%s/restore%d-%d", sideAckedBase, n.restores, i)
		call := n.e.h.Now()
		if _, err := n.admin.Put(ctx, key, []byte(key), sdk.MakeParents()); err == nil {
			n.e.h.AddPrefixWrite(check.PrefixWrite{Prefix: sidePrefix, Key: key, Value: key, Call: call, Return: n.e.h.Now()})
		}
	}
}

// restoreOn stops each planned lockd in turn, imports the backup with
// lockd restore, and starts it again.
func (n *executor) restoreOn(ctx context.Context, on []int) error {
	bin, err := cluster.Binary()
	if err != nil {
		return err
	}
	for _, id := range on {
		n.down[id] = true
		if err := n.c.Stop(id); err != nil {
			if n.c.Running(id) {
				return fmt.Errorf("stop lockd %d: %w", id, err)
			}
			// The harness killed it after its stop bound: an operator's
			// kill -9 before lockd restore, which is fine.
			n.e.h.AddOutcome("restore-old: a lockd did not stop within the harness's bound of SIGTERM (killed)")
			n.logf("chaos: restore-old: %v", err)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		args := append([]string{"restore", "--cell-name", sideCell, "--from", n.backupDir}, n.c.ServeArgs(id)...)
		out, err := exec.CommandContext(rctx, bin, args...).CombinedOutput()
		cancel()
		if err != nil {
			_ = n.restart(id)
			return fmt.Errorf("lockd restore on lockd %d: %v: %s", id, err, out)
		}
		if err := n.restart(id); err != nil {
			return fmt.Errorf("restart lockd %d: %w", id, err)
		}
	}
	return nil
}

// waitSideServed waits (bounded) until /side answers a read again.
func (n *executor) waitSideServed(ctx context.Context) {
	for i := 0; i < 120 && ctx.Err() == nil; i++ {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := n.admin.Get(gctx, sidePrefix+"/v")
		cancel()
		if err == nil || api.CodeOf(err) == api.CodeNoNode {
			return
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
	n.violation("liveness", "restore-old: %s not served 30 s after the restore", sidePrefix)
}

// staleLock: a fresh client takes a lock under /side (on the cell the
// directory names now); the client whose directory predates the move
// tries the same lock. If both hold it at once, two cells serve /side
// (finding 3).
func (n *executor) staleLock(ctx context.Context, staleC *sdk.Client) {
	fresh, err := n.e.newClient("admin", false, n.e.cfg.RequestTimeout)
	if err != nil {
		return
	}
	defer fresh.Close()
	m1 := fresh.NewMutex(sideStaleLock)
	if err := m1.TryLock(ctx, 5*time.Second); err != nil {
		n.logf("chaos: restore-old: the fresh client could not lock %s: %v", sideStaleLock, err)
		return
	}
	defer func() { uctx, c := n.e.callCtx(); _ = m1.Unlock(uctx); c() }()
	m2 := staleC.NewMutex(sideStaleLock)
	err = m2.TryLock(ctx, 2*time.Second)
	n.e.h.Checked("single-server")
	if err == nil {
		cell1, _ := fresh.CellFor(sideStaleLock)
		n.violation("single-server", "restore-old: %s held by a fresh client (token %#x, cell %s) and by a client with the directory of before the move (token %#x) at once",
			sideStaleLock, m1.Token(), cell1, m2.Token())
		uctx, c := n.e.callCtx()
		_ = m2.Unlock(uctx)
		c()
		n.e.h.AddOutcome("restore-old: stale client granted")
		return
	}
	n.e.h.AddOutcome("restore-old: stale client refused (" + outcome(err) + ")")
}

// restoreWindows are the restores' windows, stretched by a lease after
// each (sessions opened after a backup end with the restore, by design).
func restoreWindows(rs []check.RestoreEvent, lease time.Duration) []check.Window {
	var ws []check.Window
	for _, r := range rs {
		ws = append(ws, check.Window{Start: r.Start, End: r.End + lease, What: "restore of " + r.Cell})
	}
	return slices.Clip(ws)
}
