package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
	"github.com/lockservice/lockd/tests/cluster"
)

// maxFreshCells bounds the cells the move-new-cell nemesis creates in one
// run (there is no cell delete; each adds three replicas to the lockds).
const maxFreshCells = 3

// sideTarget reads the directory: the cell serving /side, the cell a move
// should go to (demo ↔ side; from a fresh cell back to side), and the
// prefix's record.
func (n *executor) sideTarget(ctx context.Context) (from, to string, pi api.PrefixInfo, err error) {
	if err := n.admin.RefreshDirectory(ctx); err != nil {
		return "", "", pi, err
	}
	pi, ok := n.admin.Directory().Prefix(sidePrefix)
	if !ok {
		return "", "", pi, fmt.Errorf("%s is not in the directory", sidePrefix)
	}
	to = sideCell
	if pi.Cell == sideCell {
		to = cellName
	}
	return pi.Cell, to, pi, nil
}

// settleMove finishes a migration of /side a nemesis left in flight, as an
// operator would (lockctl migrate again), and reports whether the prefix
// is served and not moving afterwards.
func (n *executor) settleMove(ctx context.Context, what string) error {
	for i := 0; i < 10; i++ {
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := n.admin.RefreshDirectory(mctx)
		pi, ok := n.admin.Directory().Prefix(sidePrefix)
		if err == nil && ok && pi.Migration == nil {
			cancel()
			return nil
		}
		if ok && pi.Migration != nil {
			// The operator resumes; a migration another driver owns (one
			// that died) is taken over explicitly, as lockctl's refusal says.
			_, err = n.admin.MovePrefix(mctx, sidePrefix, pi.Migration.To, nil)
			if api.CodeOf(err) == api.CodeMigrationInProgress {
				_, err = n.admin.MovePrefix(mctx, sidePrefix, pi.Migration.To, nil, sdk.TakeOver())
				n.e.h.AddOutcome(what + ": left in flight, taken over by the operator: " + outcome(err))
			} else {
				n.e.h.AddOutcome(what + ": left in flight, resumed by the operator: " + outcome(err))
			}
			n.logf("chaos: %s: resumed the migration of %s to %s: %v", what, sidePrefix, pi.Migration.To, err)
		}
		cancel()
		sleepCtx(ctx, time.Second)
	}
	n.violation("migration", "%s: %s still migrating after 10 resumes", what, sidePrefix)
	return errors.New("migration not settled")
}

// checkBulk counts the bulk nodes right after a move: each one is an
// acknowledged write (checker m2 reads them all back at the end; this is
// the same check at the moment, with the nemesis that lost them).
func (n *executor) checkBulk(ctx context.Context, what string) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	names, _, err := n.admin.Children(cctx, sideBulkBase)
	n.e.h.Checked("migration")
	switch {
	case err != nil:
		n.violation("migration", "%s: list %s: %v", what, sideBulkBase, err)
	case len(names) != n.bulk:
		n.violation("migration", "%s: %s has %d of its %d nodes", what, sideBulkBase, len(names), n.bulk)
	}
}

// raceMove is the racing-drivers nemesis (finding 1): two MovePrefix calls
// on /side to the same cell, on two clients, started 30–90 ms apart. Both
// done, or the second refused (after the fix a second driver must take
// over explicitly) are accepted and recorded; every node must be there.
type raceMove struct{}

func (raceMove) Kind() FaultKind { return RaceMove }
func (raceMove) Needs() []need   { return nil }

func (raceMove) Inject(ctx context.Context, n *executor, st Step, _ target) error {
	mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, to, _, err := n.sideTarget(mctx)
	if err != nil {
		return err
	}
	second, err := n.e.newClient("admin", false, 0)
	if err != nil {
		return err
	}
	gap := time.Duration(30+st.Pick%61) * time.Millisecond
	n.count(st.Label())
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { _, errs[0] = n.admin.MovePrefix(mctx, sidePrefix, to, nil) })
	time.Sleep(gap)
	wg.Go(func() { _, errs[1] = second.MovePrefix(mctx, sidePrefix, to, nil) })
	wg.Wait()
	_ = second.Close()
	out := fmt.Sprintf("race-move: first %s, second %s", outcome(errs[0]), outcome(errs[1]))
	n.e.h.AddOutcome(out)
	n.logf("chaos: %s (%v apart, to %s)", out, gap, to)
	if errs[0] != nil && errs[1] != nil {
		n.violation("migration", "race-move: both drivers failed on a healthy cluster: %v; %v", errs[0], errs[1])
	}
	err = n.settleMove(ctx, "race-move")
	n.checkBulk(ctx, "race-move")
	return err
}

// outcome names a driver's result for the report.
func outcome(err error) string {
	if err == nil {
		return "done"
	}
	if c := api.CodeOf(err); c != "" {
		return "refused (" + string(c) + ")"
	}
	return "failed"
}

// killDriver is the killed-driver nemesis: a lockctl migrate process is
// killed with kill -9 as soon as it reports its first copied page, and two
// drivers then resume the migration at once. Every node must be there.
type killDriver struct{}

func (killDriver) Kind() FaultKind { return KillDriver }
func (killDriver) Needs() []need   { return nil }

func (killDriver) Inject(ctx context.Context, n *executor, st Step, _ target) error {
	mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, to, _, err := n.sideTarget(mctx)
	if err != nil {
		return err
	}
	killed, pid, err := n.killedDriver(mctx, st, to)
	if err != nil {
		return err
	}
	n.count(st.Label())
	if !killed {
		n.e.h.AddOutcome("kill-driver: the driver finished before its first page")
	}
	// Two operators resume at once, each taking the dead driver's
	// migration over (a plain resume of a migration another driver owns
	// is refused).
	second, err := n.e.newClient("admin", false, 0)
	if err != nil {
		return err
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { _, errs[0] = n.admin.MovePrefix(mctx, sidePrefix, to, nil, sdk.TakeOver()) })
	wg.Go(func() { _, errs[1] = second.MovePrefix(mctx, sidePrefix, to, nil, sdk.TakeOver()) })
	wg.Wait()
	_ = second.Close()
	out := fmt.Sprintf("kill-driver: two take-overs at once: %s, %s", outcome(errs[0]), outcome(errs[1]))
	n.e.h.AddOutcome(out)
	n.logf("chaos: lockctl migrate (pid %d) killed mid-copy: %v; %s", pid, killed, out)
	err = n.settleMove(ctx, "kill-driver")
	n.checkBulk(ctx, "kill-driver")
	return err
}

// killedDriver runs lockctl migrate of /side to to and kill -9s it by PID
// at its first "copying" progress line (plus up to 20 ms); killed is false
// if it finished first.
func (n *executor) killedDriver(ctx context.Context, st Step, to string) (killed bool, pid int, err error) {
	bin, err := cluster.BuildBinary("./ctl/cmd/lockctl")
	if err != nil {
		return false, 0, err
	}
	cmd := exec.Command(bin, "--endpoints", strings.Join(n.e.endpoints, ","), "--direct", "migrate", sidePrefix, "--to", to)
	cmd.Env = append(os.Environ(), "LOCKCTL_AUTH_TOKEN="+n.e.adminToken) // ctl.EnvAuthToken
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return false, 0, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cluster.StartProcess(cmd); err != nil {
		return false, 0, fmt.Errorf("start lockctl migrate: %w", err)
	}
	copying := make(chan struct{})
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "copying") {
				once.Do(func() { close(copying) })
			}
		}
		exited <- cmd.Wait()
	}()
	select {
	case <-copying:
		time.Sleep(time.Duration(st.Pick%20) * time.Millisecond)
		killed = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) == nil
	case <-exited:
	case <-ctx.Done():
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
	}
	return killed, cmd.Process.Pid, nil
}

// freshCellName is the name of the i-th cell move-new-cell creates.
func freshCellName(i int) string { return fmt.Sprintf("fresh%d", i) }

// moveNewCell is the fresh-cell nemesis (finding 2): a cell is created
// and /side moved to it at once. A move that fails half-way on a healthy
// cluster is a violation (the prefix stays sealed until an operator acts);
// the nemesis then resumes it as the operator would. At most
// maxFreshCells in a run.
type moveNewCell struct{}

func (moveNewCell) Kind() FaultKind { return MoveNewCell }
func (moveNewCell) Needs() []need   { return []need{needCellBudget} }

func (moveNewCell) Inject(ctx context.Context, n *executor, st Step, _ target) error {
	mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	n.fresh++
	name := freshCellName(n.fresh)
	if _, err := n.admin.CreateCell(mctx, api.CreateCellRequest{Name: name, Replicas: 3}); err != nil {
		n.fresh-- // not created (h2 counts the cells created)
		return fmt.Errorf("create cell %s: %w", name, err)
	}
	n.count(st.Label())
	want := fmt.Sprintf("before the move to %s", name)
	if _, err := n.admin.Put(mctx, sidePrefix+"/v", []byte(want)); err != nil {
		return fmt.Errorf("put before the move: %w", err)
	}
	res, err := n.admin.MovePrefix(mctx, sidePrefix, name, nil)
	n.e.h.AddOutcome("move-new-cell: " + outcome(err))
	n.e.h.Checked("migration")
	if err != nil {
		n.violation("migration", "move of %s to cell %s created just before: %v", sidePrefix, name, err)
		_ = n.settleMove(ctx, "move-new-cell")
	} else {
		n.logf("chaos: moved %s %s → %s just created (epoch %d, %d nodes)", sidePrefix, res.From, res.To, res.Epoch, res.Nodes)
	}
	got, err := n.admin.Get(mctx, sidePrefix+"/v")
	if err != nil || string(got.Value) != want {
		n.violation("migration", "%s/v after the move to %s: %q, %v; want %q", sidePrefix, name, got.Value, err, want)
	}
	n.checkBulk(ctx, "move-new-cell")
	return nil
}

// moveHeld is the move-with-locks-held nemesis (finding 7): a holder
// process holds a lock under /side and an in-process waiter queues behind
// it while the side config workers read from their caches; on odd picks
// the holder is stopped (SIGSTOP: it can neither renew nor acknowledge
// the loss) just before the move. The waiter's grant on the new cell must
// not come before the holder's lease (and lock-delay) has run out, unless
// the holder reported the loss first (checker m4).
type moveHeld struct{}

func (moveHeld) Kind() FaultKind { return MoveHeld }
func (moveHeld) Needs() []need   { return nil }

func (moveHeld) Inject(ctx context.Context, n *executor, st Step, _ target) error {
	mctx, cancel := context.WithTimeout(ctx, 2*time.Minute+2*n.e.cfg.Lease)
	defer cancel()
	_, to, _, err := n.sideTarget(mctx)
	if err != nil {
		return err
	}
	h, name, err := n.grantedHolder("held-holder", sideHeldLock)
	if err != nil {
		return err
	}
	defer func() { _ = h.kill() }()
	waiter, err := n.e.newClient("move-waiter", true, n.e.cfg.RequestTimeout)
	if err != nil {
		return err
	}
	defer waiter.Close()
	m := waiter.NewMutex(sideHeldLock)
	granted := n.queueWaiter(mctx, m)
	time.Sleep(200 * time.Millisecond) // the waiter queues
	paused := st.Pick%2 == 1
	if paused {
		_ = h.signal(syscall.SIGSTOP)
	}
	n.count(st.Label())
	_, err = n.admin.MovePrefix(mctx, sidePrefix, to, nil)
	n.e.h.AddOutcome(fmt.Sprintf("move-held (holder paused %v): move %s", paused, outcome(err)))
	if err != nil {
		n.violation("migration", "move of %s with a lock held: %v", sidePrefix, err)
		_ = n.settleMove(ctx, "move-held")
	}
	var g time.Duration
	select {
	case at, ok := <-granted:
		if ok {
			g = at
		}
	case <-time.After(2*n.e.cfg.Lease + 10*time.Second):
		n.violation("liveness", "move-held: the waiter on %s was not granted within 2 leases after the move", sideHeldLock)
	}
	until, lost := h.lease()
	mh := check.MovedHold{Lock: sideHeldLock, Holder: name, Waiter: "move-waiter", Until: until, Grant: g}
	if lost > 0 && (lost < until || until == 0) {
		mh.Until, mh.Acked = lost, true
	}
	n.e.h.AddMovedHold(mh)
	n.logf("chaos: move-held: holder %s (paused %v) lease until %v, lost at %v; waiter granted at %v", name, paused, until.Round(time.Millisecond), lost.Round(time.Millisecond), g.Round(time.Millisecond))
	if paused {
		_ = h.signal(syscall.SIGCONT)
	}
	uctx, ucancel := n.e.callCtx()
	_ = m.Unlock(uctx)
	ucancel()
	return nil
}

// queueWaiter locks m in the background: the channel receives the time of
// the grant (its hold interval recorded until ctx ends), or is closed if
// the Lock failed.
func (n *executor) queueWaiter(ctx context.Context, m *sdk.Mutex) <-chan time.Duration {
	granted := make(chan time.Duration, 1)
	go func() {
		if err := m.Lock(ctx); err != nil {
			close(granted)
			return
		}
		at := n.e.h.Now()
		hold := n.e.newHolding(sideHeldLock, m.Node(), "move-waiter", api.LockExclusive)
		hold.live(m.Context(), at)
		granted <- at
		<-ctx.Done()
		hold.release()
	}()
	return granted
}

// staleClient opens a client whose directory is read now, for use after
// the directory changed (it learns the change only from a refusal).
func (n *executor) staleClient() (*sdk.Client, error) {
	return n.e.newClient("admin", false, n.e.cfg.RequestTimeout)
}

// grantedHolder starts a holder process (named kind-N) on lock and waits
// for its grant (at most the takeover bound); on an error it is killed.
func (n *executor) grantedHolder(kind, lock string) (*holderProc, string, error) {
	n.holders++
	name := fmt.Sprintf("%s-%d", kind, n.holders)
	h, err := n.e.startHolderOn(n.holderBin, n.resourceURL, n.logDir, name, lock)
	if err != nil {
		return nil, name, err
	}
	select {
	case <-h.granted:
		return h, name, nil
	case <-h.done:
		err = fmt.Errorf("%s exited before its grant", name)
	case <-time.After(n.e.cfg.TakeoverBound):
		err = fmt.Errorf("%s not granted", name)
	}
	_ = h.kill()
	return nil, name, err
}
