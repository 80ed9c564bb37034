package integration_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/sdk/fence"
	"github.com/lockservice/lockd/tests/cluster"
)

// fencedResource is a protected resource for the scenario tests: writes
// carry the holder's token in the Fencing-Token header, and fence.Middleware
// refuses (409) any below the highest it has accepted for the lock.
type fencedResource struct {
	lock     string
	url      string
	fence    *fence.Fence
	rejected func() float64 // the fence's rejection counter for lock
	http     *http.Client
}

func newFencedResource(t *testing.T, lock string) *fencedResource {
	rejected := fence.NewRejectionCounter()
	f := fence.New(rejected)
	mux := http.NewServeMux()
	mux.Handle("POST /write", fence.Middleware(f, func(*http.Request) string { return lock },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	hc := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	return &fencedResource{
		lock: lock, url: srv.URL + "/write", fence: f, http: hc,
		rejected: func() float64 { return testutil.ToFloat64(rejected.WithLabelValues(lock)) },
	}
}

// write sends a fenced write with token and returns the HTTP status.
func (r *fencedResource) write(token uint64, body string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, r.url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	fence.SetToken(req, token)
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// contender is one of the scenario's processes: its own client, so its
// own session, and one Mutex on the shared lock.
type contender struct {
	i  int
	cl *sdk.Client
	m  *sdk.Mutex
}

// grantNote is what a contender reports the moment Lock returns.
type grantNote struct {
	c     *contender
	token uint64
	at    time.Time
}

// TestScenario3 is the spec's scenario 3 on a real five-replica cluster:
// scenarioContenders processes, each with its own session (its own
// sdk.Client), contend for one lock held by a separate OS process (the
// pausedleader example in worker mode).
//
//  1. Every contender queues behind the holder. A waiter in the middle of
//     the line dies (its client is closed, without Unlock): exactly one
//     watch event is delivered (the leader's lockd_watch_events_per_write)
//     and only its successor wakes (Mutex.Wakeups), re-lists and waits on.
//  2. The holder is SIGSTOPped with a write prepared, past its 3 s lease:
//     the cell expires its session, one waiter (the next in line) wakes and
//     holds, and its first act is a fenced write. The holder resumes; its
//     late write is refused by the fence.Fence (409, one rejection counted).
//  3. The lock is handed down the whole line. Every release wakes exactly
//     one waiter: per release, the histogram shows no write delivering more
//     than the successor's event plus the releasing holder's own node watch,
//     and the Wakeups of all contenders add up to one per handoff (the
//     dead waiter's successor is woken twice, everyone else once). Tokens
//     increase, no two holders overlap, no node is left behind.
//
// The full 2 000 runs without the race detector
// (go test -run TestScenario3 -v ./tests/integration/, about a minute on
// two cores); under -race (make test) 200, because the race detector
// aborts beyond 8128 live goroutines.
func TestScenario3(t *testing.T) {
	// Not parallel: it counts exactly one wake-up per hand-off among 200
	// contenders, which other clusters' load on the machine would blur.
	// A waiter that has heard nothing for a lease re-lists (the SDK's
	// second net, Mutex.awaitWakeup); when that re-list lands between its
	// predecessor's delete and the event, it moves on without a wake-up
	// (seen under load: 4 of the 200, in a run whose hand-offs took 30 ms
	// at the median, 89 ms at p99). The SDK counts those (Mutex.Unheard),
	// so every release is either heard or unheard by its one successor,
	// none by anyone else. A few unheard (a twentieth of the hand-offs) are
	// the race, each found promptly (silentHandoffMax); a lost event is
	// still caught: its waiter holds only at its next silence, spread over
	// a lease after the release.
	n := scenarioContenders
	const (
		lock        = "/demo/scenario3/lock"
		holderLease = 3 * time.Second
		// Contenders keep the spec's 12 s lease: 2 000 sessions renewing
		// every 4 s on two cores, with room for the test's own load.
		lease = 12 * time.Second
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := cluster.Start(t, cluster.Options{})
	res := newFencedResource(t, lock)
	worker := cluster.Build(t, "./sdk/examples/pausedleader")
	probe := newSDK(t, c, lease)

	// The holder: a separate process that holds the lock and writes.
	w := startLineProc(t, "worker", worker, "worker", "--name", "paused",
		"--endpoints", strings.Join(c.Endpoints(), ","), "--lock", lock,
		"--lease", holderLease.String(), "--work", "300ms", "--resource", res.url)
	wHold := w.await("holding", 30*time.Second)
	wToken, _ := strconv.ParseUint(field(wHold, "token"), 10, 64)
	w.await("wrote", 30*time.Second)

	// n contenders queue behind it, each with its own client and session.
	start := time.Now()
	cs := make([]*contender, n)
	granted := make(chan grantNote, n)
	lockErrs := make(chan error, n)
	var dying sync.Map // index → true: its Lock is expected to fail
	var wg sync.WaitGroup
	t.Cleanup(func() { closeClients(cs) })
	for i := range cs {
		// One client at a time: each loads the directory, then its Lock
		// opens a session and creates its node in the background.
		cctx, ccancel := context.WithTimeout(ctx, callTimeout)
		cl, err := sdk.New(cctx, sdk.Config{Endpoints: c.Endpoints(), Lease: lease})
		ccancel()
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		ct := &contender{i: i, cl: cl, m: cl.NewMutex(lock)}
		cs[i] = ct
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ct.m.Lock(ctx); err != nil {
				if _, ok := dying.Load(ct.i); !ok {
					lockErrs <- fmt.Errorf("contender %d: %w", ct.i, err)
				}
				return
			}
			granted <- grantNote{c: ct, token: ct.m.Token(), at: time.Now()}
		}()
	}
	waitChildren(t, probe, lock, n+1)
	t.Logf("%d contenders queued behind the holder in %v", n, time.Since(start).Round(time.Millisecond))

	bySession := map[uint64]*contender{}
	for _, ct := range cs {
		s, err := ct.cl.Session(ctx, "demo")
		must(t, err)
		bySession[s.ID()] = ct
	}
	line := lockLine(t, probe, lock)
	if len(line) != n+1 {
		t.Fatalf("%d nodes in line, want %d", len(line), n+1)
	}
	ownerOf := func(node string) *contender {
		t.Helper()
		nd, err := probe.Get(ctx, node)
		must(t, err)
		ct := bySession[nd.Owner]
		if ct == nil {
			t.Fatalf("%s is owned by session %d, no contender's", node, nd.Owner)
		}
		return ct
	}
	first := ownerOf(line[1])
	mid := n / 2
	victim, successor := ownerOf(line[mid]), ownerOf(line[mid+1])
	// wantWakes is a contender's wake-ups by the end, heard or unheard
	// (woken): one per wait it ended holding; the dead waiter's successor
	// also woke at the death.
	wantWakes := func(ct *contender) int64 {
		switch ct {
		case victim:
			return 0
		case successor:
			return 2
		}
		return 1
	}
	if got := totalWoken(cs); got != 0 {
		t.Fatalf("%d wake-ups before anything was released", got)
	}

	// 1. A waiter in the middle of the line dies: its client closes without
	// Unlock, the cell deletes its node, and only its successor wakes.
	before := scrapeFanout(t, c, "demo")
	dying.Store(victim.i, true)
	closed := time.Now()
	must(t, victim.cl.Close())
	pollUntil(t, 30*time.Second, "the dead waiter's successor to wake", func() bool { return woken(successor) == 1 })
	if moved := time.Since(closed); successor.m.Unheard() > 0 && moved >= silentHandoffMax {
		t.Errorf("the dead waiter's successor moved on only by its silence re-list, %v after the death: its event lost?", moved)
	}
	time.Sleep(500 * time.Millisecond) // anyone else woken would show by now
	death := scrapeFanout(t, c, "demo").sub(before)
	t.Logf("waiter %d of %d died: %v; wake-ups: successor %d (unheard %d), all %d", mid, n, death, successor.m.Wakeups(), successor.m.Unheard(), totalWakeups(cs))
	if death.sum != 1 || death.over("1") != 0 {
		t.Errorf("the dead waiter's node delivered %v, want exactly 1 event", death)
	}
	if got := totalWoken(cs); got != 1 {
		t.Errorf("%d waiters woken (or moved on unheard) by one waiter's death, want 1 (its successor)", got)
	}
	if l := lockLine(t, probe, lock); len(l) != n || l[mid] != line[mid+1] {
		t.Fatalf("after the death the line is %d long with %s at %d, want %d with %s", len(l), l[mid], mid, n, line[mid+1])
	}

	// 2. The holder is paused past its lease with a write prepared.
	before = scrapeFanout(t, c, "demo")
	w.drain()
	prepared := w.await("prepared", 10*time.Second)
	w.signal(syscall.SIGSTOP)
	paused := time.Now()
	var h grantNote
	select {
	case h = <-granted:
	case err := <-lockErrs:
		t.Fatal(err)
	case <-time.After(holderLease + 30*time.Second):
		t.Fatalf("nobody took over %v after the holder was paused", holderLease+30*time.Second)
	}
	took := h.at.Sub(paused)
	expiry := scrapeFanout(t, c, "demo").sub(before)
	t.Logf("holder paused: contender %d holds %v later (lease %v); expiry %v", h.c.i, took.Round(time.Millisecond), holderLease, expiry)
	if h.c != first {
		t.Fatalf("contender %d took over, but %d was next in line", h.c.i, first.i)
	}
	if h.token <= wToken {
		t.Fatalf("new holder's token %d not above the paused holder's %d", h.token, wToken)
	}
	// The expiry deletes the holder's node: its successor's watch and the
	// paused holder's own node watch (its session's, never delivered).
	if expiry.sum < 1 || expiry.sum > 2 || expiry.over("2") != 0 {
		t.Errorf("the holder's expiry delivered %v, want the successor's event (and the holder's own watch)", expiry)
	}
	// An expiry's event found only by the silence re-list must come as
	// promptly as the event would: later, the event was lost.
	if first.m.Unheard() > 0 && took >= holderLease+silentHandoffMax {
		t.Errorf("contender %d took over by its silence re-list %v after the pause (lease %v): the expiry's event lost?", first.i, took.Round(time.Millisecond), holderLease)
	}
	if woken(first) != 1 || totalWoken(cs) != 2 {
		t.Errorf("after the takeover: new holder woken %d times, all %d (unheard releases counted); want 1 and 2", woken(first), totalWoken(cs))
	}
	// The new holder's first act: a fenced write that raises the mark.
	if st, err := res.write(h.token, "first act"); err != nil || st != http.StatusOK {
		t.Fatalf("new holder's fencing write: %d %v", st, err)
	}
	w.signal(syscall.SIGCONT)
	refused := w.await("refused", 30*time.Second)
	if field(refused, "seq") != field(prepared, "seq") || field(refused, "token") != field(prepared, "token") {
		t.Errorf("refused %q, but the write prepared before the pause was %q", refused, prepared)
	}
	if got := res.rejected(); got != 1 {
		t.Errorf("%v stale writes counted by the fence, want 1", got)
	}
	if hi := res.fence.Highest(lock); hi != h.token {
		t.Errorf("fence mark %d, want the new holder's token %d", hi, h.token)
	}
	if err := w.wait(30 * time.Second); err != nil {
		t.Errorf("paused worker after resuming: %v", err)
	}

	// 3. Hand the lock down the whole line, one release at a time.
	handoffOf := map[*contender]time.Duration{} // release → grant, per new holder
	before = scrapeFanout(t, c, "demo")
	wakeBefore := totalWakeups(cs)
	unheardBefore := map[*contender]int64{}
	for _, ct := range cs {
		unheardBefore[ct] = ct.m.Unheard()
	}
	releases := n - 1 // every contender but the dead one holds once
	handoffs := make([]time.Duration, 0, releases)
	prevToken := h.token
	for k := 0; k < releases; k++ {
		if k > 0 {
			if st, err := res.write(h.token, "first act"); err != nil || st != http.StatusOK {
				t.Fatalf("holder %d's fencing write: %d %v", h.c.i, st, err)
			}
		}
		select {
		case extra := <-granted:
			t.Fatalf("contender %d was granted while contender %d still held the lock", extra.c.i, h.c.i)
		default:
		}
		released := time.Now()
		if err := h.c.m.Unlock(ctx); err != nil {
			t.Fatalf("contender %d Unlock: %v", h.c.i, err)
		}
		if k == releases-1 {
			break
		}
		select {
		case h = <-granted:
		case err := <-lockErrs:
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatalf("handoff %d: nobody granted 30s after a release", k)
		}
		handoffs = append(handoffs, h.at.Sub(released))
		handoffOf[h.c] = h.at.Sub(released)
		// Held without its predecessor's event, and late: the event was
		// lost, not raced by the silence re-list (checked again per
		// contender below; failing here ends a lost-events run early).
		if h.c.m.Unheard() > unheardBefore[h.c] && handoffOf[h.c] >= silentHandoffMax {
			t.Fatalf("handoff %d: contender %d held %v after the release without its predecessor's event: lost?", k, h.c.i, handoffOf[h.c])
		}
		if h.token <= prevToken {
			t.Fatalf("handoff %d: token %d after %d", k, h.token, prevToken)
		}
		prevToken = h.token
	}
	wg.Wait()
	close(lockErrs)
	for err := range lockErrs {
		t.Error(err)
	}
	chain := scrapeFanout(t, c, "demo").sub(before)
	wakes := totalWakeups(cs) - wakeBefore
	sortedDurations(handoffs)
	t.Logf("%d releases: %v; %.3f events per release; %d waiters woken (%.3f per handoff); handoff p50 %v p99 %v",
		releases, chain, chain.sum/float64(releases), wakes, float64(wakes)/float64(releases-1),
		percentile(handoffs, 0.50).Round(time.Microsecond), percentile(handoffs, 0.99).Round(time.Microsecond))
	// One event per release, the successor's: the releasing holder's own
	// node watch is consumed without one (its client knows of its delete).
	if chain.over("1") != 0 || chain.sum != float64(releases-1) {
		t.Errorf("the releases delivered %v: want exactly the successor's event per release", chain)
	}
	silent := 0 // granted by a re-list after a lease of silence
	for _, ct := range cs {
		want := wantWakes(ct)
		handoff, ok := handoffOf[ct]
		if got := woken(ct); got != want {
			t.Errorf("contender %d woken %d times (%d of them releases found by its silence re-list), want %d (granted %v after its predecessor's release)", ct.i, got, ct.m.Unheard(), want, handoff)
		}
		if u := ct.m.Unheard() - unheardBefore[ct]; u > 0 {
			silent += int(u)
			if !ok || handoff >= silentHandoffMax {
				t.Errorf("contender %d found %d releases by its silence re-list, granted %v after its predecessor's release: events lost?", ct.i, u, handoff)
			}
		}
	}
	if silent > 0 {
		t.Logf("%d contenders took the lock by their silence re-list, each within %v of the release", silent, silentHandoffMax)
	}
	if limit := max(2, releases/20); silent > limit {
		t.Errorf("%d contenders held without their predecessor's event, at most %d expected: events lost?", silent, limit)
	}
	if wakes+int64(silent) != int64(releases-1) {
		t.Errorf("%d waiters woken and %d granted by a silence re-list over %d handoffs: a release woke more (or fewer) than one waiter", wakes, silent, releases-1)
	}
	if l := lockLine(t, probe, lock); len(l) != 0 {
		t.Errorf("%d lock nodes left behind: %v", len(l), l[:min(len(l), 5)])
	}

	// 4. A release costs the successor's event only. A holder on the raw
	// API releases to an SDK waiter: one event. Then the SDK holder (its
	// own-node watch armed by the grant) releases with nobody waiting: no
	// event at all, as its own delete consumes its watch.
	const control = "/demo/scenario3/control"
	raw := c.NewClient()
	defer raw.Close()
	rs := openSession(t, raw, "demo", lease)
	rs.keepAlive(lease / 3)
	defer func() { _ = rs.close() }()
	g, err := rs.acquire(control)
	must(t, err)
	m := newSDK(t, c, lease).NewMutex(control)
	lockDone := make(chan error, 1)
	go func() { lockDone <- m.Lock(ctx) }()
	waitChildren(t, probe, control, 2)
	before = scrapeFanout(t, c, "demo")
	must(t, rs.release(&g))
	must(t, <-lockDone)
	rawRelease := scrapeFanout(t, c, "demo").sub(before)
	before = scrapeFanout(t, c, "demo")
	must(t, m.Unlock(ctx))
	pollUntil(t, 10*time.Second, "the SDK release to be counted", func() bool { return scrapeFanout(t, c, "demo").sub(before).count >= 1 })
	sdkRelease := scrapeFanout(t, c, "demo").sub(before)
	t.Logf("control: a raw-API holder's release to one waiter: %v; an SDK holder's release to nobody: %v", rawRelease, sdkRelease)
	if rawRelease.sum != 1 || sdkRelease.sum != 0 {
		t.Errorf("control releases delivered %v and %v, want 1 and 0 events", rawRelease, sdkRelease)
	}
}

// silentHandoffMax bounds the hand-off of a contender that took the lock
// by its silence re-list rather than its event (TestScenario3): one whose
// re-list raced the event holds as promptly as an evented one.
const silentHandoffMax = time.Second

// lockLine is the lock's nodes in line order.
func lockLine(t *testing.T, cl *sdk.Client, lock string) []string {
	t.Helper()
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	names, _, err := cl.Children(ctx, lock)
	if errors.Is(err, sdk.ErrNoNode) {
		return nil
	}
	must(t, err)
	sort.Strings(names) // one prefix, zero-padded sequence numbers
	for i, n := range names {
		names[i] = lock + "/" + n
	}
	return names
}

// woken is ct's releases heard (wake-ups) or found gone by its silence
// re-list (unheard): one per release it waited through.
func woken(ct *contender) int64 { return ct.m.Wakeups() + ct.m.Unheard() }

// totalWoken is woken over every contender.
func totalWoken(cs []*contender) int64 {
	var n int64
	for _, ct := range cs {
		n += woken(ct)
	}
	return n
}

func totalWakeups(cs []*contender) int64 {
	var n int64
	for _, ct := range cs {
		n += ct.m.Wakeups()
	}
	return n
}

// closeClients closes every contender's client, 64 at a time.
func closeClients(cs []*contender) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, ct := range cs {
		if ct == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_ = ct.cl.Close()
		}()
	}
	wg.Wait()
}

// pollUntil polls cond every 20 ms, failing the test after d.
func pollUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
