package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
	"github.com/lockservice/lockd/tests/cluster"
)

// Sample is one measured duration.
type Sample struct {
	Kind string
	Dur  time.Duration
}

// nemesis runs a schedule against the cluster, one step at a time: it
// starts every step from a healthy cell (five replicas running, none
// paused, no cuts, a ready leader), injects the fault, holds it, heals, and
// measures what the step is for.
type nemesis struct {
	e      *env
	c      *cluster.Cluster
	nn     *cluster.Netns // nil without namespaces
	prober *prober
	tw     *takeoverWaiter
	admin  *sdk.Client // the executor's own client (queue checks, quorum probe)
	logf   func(string, ...any)

	holderBin, resourceURL, logDir string
	proxies                        []*cluster.Proxy
	holder                         *holderProc
	holders                        int

	bulk       int    // nodes under sideBulkBase (seeded before the faults)
	fresh      int    // cells the move-new-cell nemesis created
	backupDir  string // the lockds' --backup-dir (restore-old)
	fsyncDir   string // the fsync fault control files, "" without a lockd_faults build
	restores   int
	restoreErr bool // a restore could not be completed: no more restores

	down    map[int]bool   // replicas this nemesis killed and has not restarted
	crashed map[int]string // replica → pid of the last exit reported as a crash

	mu        sync.Mutex
	counts    map[string]int
	failovers []Sample
	// fences are, for each new leader the probes saw, the span from the
	// fault to one cache window after its first commit: writes of cached
	// nodes may wait that long by design (checker h3 excuses it).
	fences    []check.Window
	takeovers []Sample
	regains   []Sample // kill-three: majority back → first commit
	steps     int
}

func (n *nemesis) count(label string) {
	n.mu.Lock()
	n.counts[label]++
	n.mu.Unlock()
}

func (n *nemesis) violation(checker, format string, args ...any) {
	d := fmt.Sprintf(format, args...)
	n.logf("chaos: VIOLATION %s: %s", checker, d)
	n.e.h.AddViolation(checker, d)
}

// run executes steps until the deadline or ctx ends.
func (n *nemesis) run(ctx context.Context, steps []Step, deadline time.Time) {
	for i, st := range steps {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return
		}
		n.e.h.Checked("liveness")
		if err := n.ensureHealthy(ctx); err != nil {
			n.violation("liveness", "before step %d: %v", i+1, err)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errCellDown) {
				n.logf("chaos: the cell did not recover; the fault schedule stops here")
				return
			}
		}
		n.logf("chaos: step %d at %v: %s", i+1, n.e.h.Now().Round(time.Millisecond), st)
		if err := n.exec(ctx, st); err != nil {
			n.logf("chaos: step %d (%s): %v", i+1, st.Kind, err)
		}
		n.mu.Lock()
		n.steps++
		n.mu.Unlock()
		sleepCtx(ctx, st.Gap)
	}
}

// ensureHealthy heals every fault: cuts removed, paused replicas resumed,
// dead ones restarted, the holder process and its waiter in place; then it
// waits for a ready leader.
func (n *nemesis) ensureHealthy(ctx context.Context) error {
	var errs []error
	if n.nn != nil {
		errs = append(errs, n.nn.Heal())
	}
	n.checkCrashes()
	for _, id := range n.c.IDs() {
		switch {
		case n.c.Paused(id):
			errs = append(errs, n.c.Resume(id))
		case !n.c.Running(id):
			errs = append(errs, n.restart(id))
		}
	}
	if _, err := n.c.WaitLeader(cellName, n.e.cfg.RecoveryBound); err != nil {
		n.checkCrashes()
		return errors.Join(append(errs, fmt.Errorf("%w: no ready leader %v after healing: %v", errCellDown, n.e.cfg.RecoveryBound, err))...)
	}
	if n.holder == nil || !n.holder.running() {
		errs = append(errs, n.newHolder(ctx))
	}
	return errors.Join(errs...)
}

// errCellDown: the cell has no ready leader after every fault was healed.
var errCellDown = errors.New("cell down")

// newHolder starts a holder process, waits for its grant, and queues the
// takeover waiter behind it.
func (n *nemesis) newHolder(ctx context.Context) error {
	n.holders++
	name := fmt.Sprintf("holder-%d", n.holders)
	p, err := n.e.startHolder(n.holderBin, n.resourceURL, n.logDir, name)
	if err != nil {
		return err
	}
	n.holder = p
	select {
	case <-p.granted:
	case <-p.done:
		return fmt.Errorf("%s exited before its grant", name)
	case <-time.After(n.e.cfg.TakeoverBound + n.e.cfg.CallTimeout):
		return fmt.Errorf("%s not granted within %v", name, n.e.cfg.TakeoverBound+n.e.cfg.CallTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	select { // a release left over from a failed step must not end the next grant at once
	case <-n.tw.release:
	default:
	}
	select {
	case n.tw.arm <- struct{}{}:
	default:
	}
	return waitQueued(ctx, n.admin, 2, n.e.cfg.CallTimeout)
}

// checkCrashes reports every replica that is down although this nemesis
// did not kill it: lockd exited by itself (a panic, a failed recovery).
// The violation carries the log lines that say why.
func (n *nemesis) checkCrashes() {
	for _, id := range n.c.IDs() {
		if n.c.Running(id) || n.down[id] {
			continue
		}
		tail := n.c.LogTail(id, 400)
		// The harness logs "replica N (pid P) exited at T: status" on every
		// exit: report each process once.
		m := reExited.FindAllStringSubmatch(tail, -1)
		if len(m) == 0 {
			continue
		}
		pid := m[len(m)-1][1]
		if n.crashed[id] == pid {
			continue
		}
		n.crashed[id] = pid
		n.violation("crash", "replica %d (pid %s) exited by itself:\n%s", id, pid, crashExcerpt(tail))
	}
}

var reExited = regexp.MustCompile(`=== testcluster: replica \d+ \(pid (\d+)\) exited at`)

// crashExcerpt picks the lines of a log tail that say why a process died.
func crashExcerpt(tail string) string {
	var keep []string
	for _, l := range strings.Split(tail, "\n") {
		switch {
		case strings.Contains(l, " E | transport"): // peers coming and going
		case strings.Contains(l, "=== testcluster"), strings.Contains(l, " E | "), strings.Contains(l, " C | "),
			strings.HasPrefix(l, "panic:"), strings.Contains(l, "level=ERROR"), strings.HasPrefix(l, "fatal error"):
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			keep = append(keep, "        "+l)
		}
	}
	if len(keep) > 12 {
		keep = keep[len(keep)-12:]
	}
	return strings.Join(keep, "\n")
}

func (n *nemesis) leader() (int, error) {
	return n.c.WaitLeader(cellName, n.e.cfg.RecoveryBound)
}

// pick chooses k distinct replica ids by the step's Pick.
func (n *nemesis) pick(st Step, k int, from []int) []int {
	ids := slices.Clone(from)
	sort.Ints(ids)
	r := rand.New(rand.NewPCG(st.Pick, 1))
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	out := ids[:min(k, len(ids))]
	sort.Ints(out)
	return out
}

func without(ids []int, x int) []int {
	var out []int
	for _, id := range ids {
		if id != x {
			out = append(out, id)
		}
	}
	return out
}

// measureFailover waits (in the background) for the first commit among
// probes started after at, and records it. Wait on the returned channel.
func (n *nemesis) measureFailover(kind string, at time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		bound := n.e.cfg.FailoverBound
		n.e.h.Checked("liveness")
		t0 := time.Now()
		for i := 0; i < 1_000_000; i++ {
			if end, ok := n.prober.firstAfter(at); ok {
				n.mu.Lock()
				n.failovers = append(n.failovers, Sample{kind, end - at})
				n.fences = append(n.fences, n.fenceAfter(kind, at, end))
				n.mu.Unlock()
				n.logf("chaos: %s: first commit under the new leader %v after the fault", kind, (end - at).Round(time.Millisecond))
				return
			}
			if time.Since(t0) > bound || n.e.ctx.Err() != nil {
				n.violation("liveness", "%s at %v: no commit within %v", kind, at.Round(time.Millisecond), bound)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return done
}

// fenceAfter is the span a fault at `at`, whose new leader first
// committed at end, lets writes of cached nodes wait: the election, then
// the new leader's cache fence, at most one cache window (its cachers
// may still be on the old leader).
func (n *nemesis) fenceAfter(kind string, at, end time.Duration) check.Window {
	return check.Window{Start: at, End: end + api.CacheWindowFor(n.e.cfg.Lease), What: "fence after " + kind}
}

func (n *nemesis) restart(ids ...int) error {
	var errs []error
	for _, id := range ids {
		errs = append(errs, n.c.Restart(id))
		delete(n.down, id)
	}
	return errors.Join(errs...)
}

func (n *nemesis) kill(ids ...int) error {
	var (
		wg   sync.WaitGroup
		errs = make([]error, len(ids))
	)
	for i, id := range ids {
		wg.Go(func() { errs[i] = n.c.Kill(id) })
		n.down[id] = true
	}
	wg.Wait()
	return errors.Join(errs...)
}

// exec runs one step; the fault is counted once it is in effect.
func (n *nemesis) exec(ctx context.Context, st Step) error {
	switch st.Kind {
	case KillLeader, KillFollower, KillTwo:
		leader, err := n.leader()
		if err != nil {
			return err
		}
		var victims []int
		switch st.Kind {
		case KillLeader:
			victims = []int{leader}
		case KillFollower:
			victims = n.pick(st, 1, without(n.c.IDs(), leader))
		default:
			victims = n.pick(st, 2, n.c.IDs())
		}
		err = n.kill(victims...)
		at := n.e.h.Now()
		n.count(st.Label())
		var measured <-chan struct{}
		if slices.Contains(victims, leader) {
			measured = n.measureFailover(string(st.Kind), at)
		}
		n.logf("chaos: killed %v (leader %d)", victims, leader)
		sleepCtx(ctx, st.Hold)
		err = errors.Join(err, n.restart(victims...))
		if measured != nil {
			<-measured
		}
		return err

	case KillThree:
		return n.noMajority(ctx, st)

	case PauseLeader:
		leader, err := n.leader()
		if err != nil {
			return err
		}
		if err := n.c.Pause(leader); err != nil {
			return err
		}
		n.count(st.Label())
		measured := n.measureFailover(st.Label(), n.e.h.Now())
		sleepCtx(ctx, st.Hold)
		err = n.c.Resume(leader)
		<-measured
		return err

	case IsolateLeader, SplitCell:
		if n.nn == nil {
			return errors.New("no network namespaces: partition skipped")
		}
		leader, err := n.leader()
		if err != nil {
			return err
		}
		var minority []int
		if st.Kind == IsolateLeader {
			minority = []int{leader}
			err = n.nn.Isolate(leader)
		} else {
			minority = n.pick(st, 2, n.c.IDs())
			err = n.nn.Partition(minority, without(without(n.c.IDs(), minority[0]), minority[1]))
		}
		at := n.e.h.Now()
		if err != nil {
			return errors.Join(err, n.nn.Heal())
		}
		n.count(st.Label())
		var measured <-chan struct{}
		if slices.Contains(minority, leader) {
			measured = n.measureFailover(string(st.Kind), at)
		}
		n.logf("chaos: cut %v off (leader %d), %d directed cuts", minority, leader, len(n.nn.Cuts()))
		sleepCtx(ctx, st.Hold)
		err = n.nn.Heal()
		if measured != nil {
			<-measured
		}
		return err

	case KillHolder, PauseHolder:
		return n.holderFault(ctx, st)

	case ReplaceReplica:
		return n.replaceReplica(ctx, st)

	case MovePrefix:
		return n.movePrefix(ctx)

	case RaceMove:
		return n.raceMove(ctx, st)
	case KillDriver:
		return n.killDriver(ctx, st)
	case MoveNewCell:
		return n.moveNewCell(ctx, st)
	case RestoreOld:
		return n.restoreOld(ctx, st)
	case SlowFsync:
		return n.slowFsync(ctx, st)
	case FailFsync:
		return n.failFsync(ctx, st)
	case MoveHeld:
		return n.moveHeld(ctx, st)
	case ExpireInFlight:
		return n.expireInFlight(ctx, st)

	case KillProxy:
		if len(n.proxies) == 0 {
			return errors.New("no proxies: kill-proxy skipped")
		}
		p := n.proxies[st.Pick%uint64(len(n.proxies))]
		if err := p.Kill(); err != nil {
			return err
		}
		n.count(st.Label())
		n.logf("chaos: killed %s", p.Name)
		sleepCtx(ctx, st.Hold)
		return p.Restart()
	}
	return fmt.Errorf("unknown fault %q", st.Kind)
}

// noMajority kills three replicas: for the hold, two run and nothing may
// commit or be read (a probe TryLock must not be granted; the checker also
// goes through every call started in the window). Then one comes back, a
// majority again: commits must resume; then the other two.
func (n *nemesis) noMajority(ctx context.Context, st Step) error {
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
	back := n.e.h.Now()
	// Commits resume once a majority runs.
	n.e.h.Checked("liveness")
	t0 := time.Now()
	for i := 0; ; i++ {
		if e, ok := n.prober.firstAfter(back); ok {
			n.mu.Lock()
			n.regains = append(n.regains, Sample{"majority back", e - back})
			n.fences = append(n.fences, n.fenceAfter("majority back", back, e))
			n.mu.Unlock()
			n.logf("chaos: majority back: first commit %v after replica %d restarted", (e - back).Round(time.Millisecond), victims[0])
			break
		}
		if !n.c.Running(victims[0]) {
			n.violation("liveness", "replica %d, restarted to give the cell its majority back, exited", victims[0])
			break
		}
		if time.Since(t0) > n.e.cfg.RecoveryBound || i > 1_000_000 || ctx.Err() != nil {
			n.violation("liveness", "no commit within %v after a majority returned (replica %d restarted at %v)", n.e.cfg.RecoveryBound, victims[0], back.Round(time.Millisecond))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// holderFault kills or pauses the holder process and measures the takeover:
// the fault → the waiter's grant. A paused holder is resumed only after the
// waiter has written with its token, so the write the holder prepared before
// the pause reaches the resource late and must be refused.
func (n *nemesis) holderFault(ctx context.Context, st Step) error {
	h := n.holder
	if h == nil || !h.running() {
		return errors.New("no holder process")
	}
	// Drop a grant left over from a previous step.
	select {
	case <-n.tw.grants:
	default:
	}
	var err error
	t0 := time.Now()
	if st.Kind == KillHolder {
		err = h.kill()
	} else {
		err = h.signal(syscall.SIGSTOP)
	}
	at := n.e.h.Now()
	if err != nil {
		return err
	}
	n.count(st.Label())
	n.logf("chaos: %s %s (pid %d)", st.Kind, h.name, h.pid())
	var grantErr error
	n.e.h.Checked("liveness")
	select {
	case g := <-n.tw.grants:
		n.mu.Lock()
		n.takeovers = append(n.takeovers, Sample{string(st.Kind), g - at})
		n.mu.Unlock()
		n.logf("chaos: takeover %v after %s", (g - at).Round(time.Millisecond), st.Kind)
	case <-time.After(n.e.cfg.TakeoverBound):
		n.violation("liveness", "%s at %v: the waiter was not granted within %v", st.Kind, at.Round(time.Millisecond), n.e.cfg.TakeoverBound)
		grantErr = errors.New("no takeover")
	case <-ctx.Done():
		grantErr = ctx.Err()
	}
	if st.Kind == PauseHolder {
		if rest := st.Hold - time.Since(t0); rest > 0 {
			sleepCtx(ctx, rest)
		}
		_ = h.signal(syscall.SIGCONT)
		select {
		case <-h.done: // it found its lock lost and exited
		case <-time.After(n.e.cfg.TakeoverBound):
			n.logf("chaos: resumed %s did not exit; killing it", h.name)
			_ = h.kill()
		}
	}
	select {
	case n.tw.release <- struct{}{}:
	default:
	}
	if grantErr != nil {
		return grantErr
	}
	return n.newHolder(ctx)
}

// stopHolder ends the holder process gracefully (it unlocks), for the
// liveness phase.
func (n *nemesis) stopHolder() {
	h := n.holder
	if h == nil || !h.running() {
		return
	}
	_ = h.signal(syscall.SIGCONT)
	_ = h.signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		_ = h.kill()
	}
}

// killHolder kills the holder process, whatever its state.
func (n *nemesis) killHolder() {
	if h := n.holder; h != nil {
		_ = h.kill()
	}
}

// fenceWindows are the fences recorded so far (fenceAfter).
func (n *nemesis) fenceWindows() []check.Window {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]check.Window(nil), n.fences...)
}
