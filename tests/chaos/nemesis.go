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

// executor runs a schedule against the cluster, one step at a time: it
// starts every step from a healthy cell (five replicas running, none
// paused, no cuts, a ready leader), checks the preconditions of the
// step's nemesis (nemeses.go), and has the nemesis inject the fault, hold
// it, heal and measure what the step is for.
type executor struct {
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
	// faults are the steps' windows, from a step's start to faultSettle
	// after the next check that every fault healed (ensureHealthy):
	// the only time a cell may commit nothing (checker h3 excuses the
	// moving prefix's outages within them only).
	faults []check.Window
}

// faultSettle is how long after its heal a fault may still keep a cell
// from committing: a fresh cell's election once its replicas are back,
// and its new leader's first commit.
const faultSettle = 5 * time.Second

// faultWindows are the steps' windows so far (executor.faults).
func (n *executor) faultWindows() []check.Window {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]check.Window(nil), n.faults...)
}

// faultEnded closes the window of the step begun at start (if any): it
// healed by now.
func (n *executor) faultEnded(start time.Duration, kind FaultKind) {
	if start < 0 {
		return
	}
	n.mu.Lock()
	n.faults = append(n.faults, check.Window{Start: start, End: n.e.h.Now() + faultSettle, What: string(kind)})
	n.mu.Unlock()
}

func (n *executor) count(label string) {
	n.mu.Lock()
	n.counts[label]++
	n.mu.Unlock()
}

func (n *executor) violation(checker, format string, args ...any) {
	d := fmt.Sprintf(format, args...)
	n.logf("chaos: VIOLATION %s: %s", checker, d)
	n.e.h.AddViolation(checker, d)
}

// run executes steps until the deadline or ctx ends.
func (n *executor) run(ctx context.Context, steps []Step, deadline time.Time) {
	last, lastKind := time.Duration(-1), FaultKind("")
	defer func() { n.faultEnded(last, lastKind) }() // healed after the run (liveness phase)
	for i, st := range steps {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return
		}
		n.e.h.Checked("liveness")
		err := n.ensureHealthy(ctx)
		n.faultEnded(last, lastKind)
		last = -1
		if err != nil {
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
		last, lastKind = n.e.h.Now(), st.Kind
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
func (n *executor) ensureHealthy(ctx context.Context) error {
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
func (n *executor) newHolder(ctx context.Context) error {
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
func (n *executor) checkCrashes() {
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

func (n *executor) leader() (int, error) {
	return n.c.WaitLeader(cellName, n.e.cfg.RecoveryBound)
}

// pick chooses k distinct replica ids by the step's Pick (pickIDs).
func (n *executor) pick(st Step, k int, from []int) []int { return pickIDs(st, k, from) }

// pickIDs chooses k distinct ids of from by the step's Pick, in order. Pure.
func pickIDs(st Step, k int, from []int) []int {
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
func (n *executor) measureFailover(kind string, at time.Duration) <-chan struct{} {
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
func (n *executor) fenceAfter(kind string, at, end time.Duration) check.Window {
	return check.Window{Start: at, End: end + api.CacheWindowFor(n.e.cfg.Lease), What: "fence after " + kind}
}

func (n *executor) restart(ids ...int) error {
	var errs []error
	for _, id := range ids {
		errs = append(errs, n.c.Restart(id))
		delete(n.down, id)
	}
	return errors.Join(errs...)
}

func (n *executor) kill(ids ...int) error {
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

// stopHolder ends the holder process gracefully (it unlocks), for the
// liveness phase.
func (n *executor) stopHolder() {
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
func (n *executor) killHolder() {
	if h := n.holder; h != nil {
		_ = h.kill()
	}
}

// fenceWindows are the fences recorded so far (fenceAfter).
func (n *executor) fenceWindows() []check.Window {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]check.Window(nil), n.fences...)
}
