package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
	"github.com/lockservice/lockd/tests/cluster"
)

// manyCells starts six lockds in three zones: lockds 1-5 host the
// directory and the bootstrap cells demo and payments; cell3 is created
// through the directory and placed over all six.
func manyCells(t *testing.T, extraArgs ...string) (*cluster.Cluster, *sdk.Client) {
	t.Helper()
	c := cluster.Start(t, cluster.Options{Lockds: 6, Zones: 3, Lease: 5 * time.Second, ExtraArgs: extraArgs})
	admin := newSDKClient(t, c)
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	// Every lockd registers itself (with its zone) within a second or so.
	for registered := 0; registered < 6; {
		must(t, admin.RefreshDirectory(ctx))
		registered = 0
		for _, l := range admin.Directory().Lockds {
			if l.Zone != "" {
				registered++
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("lockds registered with a zone: %d of 6", registered)
		}
		time.Sleep(50 * time.Millisecond)
	}
	info, err := admin.CreateCell(ctx, api.CreateCellRequest{Name: "cell3"})
	must(t, err)
	lockds, zones := map[uint64]bool{}, map[string]bool{}
	for _, r := range info.Replicas {
		if lockds[r.Lockd] {
			t.Fatalf("cell3 has two replicas on lockd %d", r.Lockd)
		}
		lockds[r.Lockd], zones[r.Zone] = true, true
	}
	if len(lockds) != 5 || len(zones) != 3 || !lockds[6] {
		t.Fatalf("cell3 placed on %+v: want 5 lockds over 3 zones, lockd 6 (hosting nothing yet) among them", info.Replicas)
	}
	_, err = admin.AssignPrefix(ctx, "/cell3", "cell3")
	must(t, err)
	_, err = admin.Put(ctx, "/cell3/ready", []byte("yes"), sdk.MakeParents())
	must(t, err)
	return c, admin
}

func newSDKClient(t *testing.T, c *cluster.Cluster) *sdk.Client {
	t.Helper()
	ctx, cancel := ctxFor(30 * time.Second)
	defer cancel()
	cl, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), RequestTimeout: 5 * time.Second})
	must(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// grantRec is one lock grant a worker saw.
type grantRec struct {
	token    uint64
	at       time.Duration
	interval check.Interval
}

// lockWorkload runs workers contending for one lock under /demo until
// stop, recording every grant's token and the interval its Context was
// live (on one monotonic clock), and a CAS counter under /demo.
type lockWorkload struct {
	start    time.Time
	mu       sync.Mutex
	grants   []grantRec
	casOK    int
	casMaybe int
	errs     map[string]int
}

func (w *lockWorkload) since() time.Duration { return time.Since(w.start) }

func (w *lockWorkload) noteErr(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs[string(api.CodeOf(err))+" "+errKind(err)]++
}

func errKind(err error) string {
	switch {
	case errors.Is(err, sdk.ErrLockLost):
		return "lock_lost"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return ""
}

// locker takes the lock over and over, holding it for 150 ms (or until
// its Context is cancelled): longer than the interval check's margin, so
// that a hold overlapping another's counts. It gives up a wait after 300 ms and comes again:
// lockers keep arriving during a move, and are sent to the new cell.
func (w *lockWorkload) locker(ctx context.Context, cl *sdk.Client, name string) {
	for i := 0; i < 100_000 && ctx.Err() == nil; i++ {
		w.holdOnce(ctx, cl, name, 300*time.Millisecond, time.After(150*time.Millisecond), nil)
	}
}

// holdOnce takes the lock (TryLock with try, else Lock), says so on held,
// holds it until release fires or its Context is cancelled, and records
// the grant. It reports whether it was granted.
func (w *lockWorkload) holdOnce(ctx context.Context, cl *sdk.Client, name string, try time.Duration, release <-chan time.Time, held chan<- struct{}) bool {
	{
		m := cl.NewMutex("/demo/locks/a")
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		var err error
		if try > 0 {
			err = m.TryLock(lctx, try)
		} else {
			err = m.Lock(lctx)
		}
		cancel()
		if errors.Is(err, sdk.ErrLockTimeout) {
			return false
		}
		if err != nil {
			w.noteErr(err)
			return false
		}
		start := w.since()
		tok, node := m.Token(), m.Node()
		if held != nil {
			held <- struct{}{}
		}
		select {
		case <-release:
		case <-m.Context().Done():
		}
		end := w.since()
		if m.Context().Err() == nil {
			uctx, ucancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := m.Unlock(uctx); err != nil {
				w.noteErr(err)
			}
			ucancel()
		}
		w.mu.Lock()
		w.grants = append(w.grants, grantRec{token: tok, at: start, interval: check.Interval{Lock: "/demo/locks/a", Node: node, Worker: name, Mode: api.LockExclusive, Start: start, End: end}})
		w.mu.Unlock()
	}
	return true
}

func (w *lockWorkload) counter(ctx context.Context, cl *sdk.Client) {
	for i := 0; i < 100_000 && ctx.Err() == nil; i++ {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		n, err := cl.Get(cctx, "/demo/ctr")
		if err == nil {
			var v int
			fmt.Sscan(string(n.Value), &v)
			_, err = cl.Put(cctx, "/demo/ctr", []byte(fmt.Sprint(v+1)), sdk.WithVersion(n.Version))
			w.mu.Lock()
			switch {
			case err == nil:
				w.casOK++
			case errors.Is(err, sdk.ErrOutcomeUnknown):
				w.casMaybe++
			}
			w.mu.Unlock()
		}
		cancel()
		if err != nil && !errors.Is(err, api.ErrVersionMismatch) {
			w.noteErr(err)
		}
	}
}

// TestMigrationUnderLoad moves /demo demo → cell3 → payments → demo while
// workers contend for a lock (one holds it for longer than the pause
// between moves) and a CAS counter under it, and checks:
// no two holders' lock Contexts were ever live at once (wall clock), tokens
// rise across every move (the directory epoch in their high bits goes
// 1 → 4), every value and version survives, the counter lost no
// acknowledged increment, and a request routed to a cell the prefix left
// is answered moved, naming the cell it went to.
func TestMigrationUnderLoad(t *testing.T) {
	t.Parallel()
	c, admin := manyCells(t)
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	const seeded = 300
	for i := 0; i < seeded; i++ {
		_, err := admin.Put(ctx, fmt.Sprintf("/demo/cfg/k%03d", i), bytes.Repeat([]byte{byte('a' + i%26)}, 100), sdk.MakeParents())
		must(t, err)
	}
	_, err := admin.Put(ctx, "/demo/ctr", []byte("0"))
	must(t, err)

	w := &lockWorkload{start: time.Now(), errs: map[string]int{}}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		cl := newSDKClient(t, c)
		wg.Add(1)
		go func() { defer wg.Done(); w.locker(wctx, cl, fmt.Sprintf("locker-%d", i)) }()
	}
	// Every move starts while a long holder holds the lock: the seal ends
	// its hold, and the new cell grants to the others only once its lease
	// may have run out.
	longCl := newSDKClient(t, c)
	holdDuringMove := func() (release func()) {
		rel, held, done := make(chan time.Time), make(chan struct{}, 1), make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 1000 && wctx.Err() == nil; i++ {
				if w.holdOnce(wctx, longCl, "long-holder", 0, rel, held) {
					return
				}
			}
		}()
		select {
		case <-held:
		case <-time.After(30 * time.Second):
			t.Error("the long holder got no grant in 30 s")
		}
		return func() { close(rel); <-done }
	}
	for i := 0; i < 2; i++ {
		cl := newSDKClient(t, c)
		wg.Add(1)
		go func() { defer wg.Done(); w.counter(wctx, cl) }()
	}
	time.Sleep(time.Second)
	for i, to := range []string{"cell3", "payments", "demo"} {
		release := holdDuringMove()
		res, err := admin.MovePrefix(ctx, "/demo", to, nil)
		// The new cell grants the lock held at the seal to nobody until
		// its holder's lease (5 s) may have run out (finding 7 of issue
		// 23); the others are granted on the new cell after that.
		time.Sleep(time.Second)
		release()
		time.Sleep(6 * time.Second)
		if err != nil {
			stop()
			wg.Wait()
			t.Fatalf("move /demo to %s: %v", to, err)
		}
		if res.Epoch != uint64(i)+2 || res.Nodes < seeded {
			t.Errorf("move %d: epoch %d, %d nodes", i+1, res.Epoch, res.Nodes)
		}
		t.Logf("/demo %s → %s: %d nodes, writes refused %v, %v in all, epoch %d", res.From, res.To, res.Nodes, res.Refusing, res.Total, res.Epoch)
		time.Sleep(time.Second)
	}
	stop()
	wg.Wait()

	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%d grants, %d acknowledged increments (%d unknown), errors %v", len(w.grants), w.casOK, w.casMaybe, w.errs)

	var ivs []check.Interval
	for _, g := range w.grants {
		ivs = append(ivs, g.interval)
		if g.interval.Worker == "long-holder" {
			t.Logf("long hold of %s: %v → %v (token epoch %d)", g.interval.Node, g.interval.Start.Round(time.Millisecond), g.interval.End.Round(time.Millisecond), api.TokenEpoch(g.token))
		}
	}
	if n, vs := check.CheckIntervals(ivs, sdk.DriftMargin(5*time.Second)); len(vs) > 0 {
		t.Errorf("mutual exclusion: %d violations in %d intervals, first: %v", len(vs), n, vs[0])
	}
	sort.Slice(w.grants, func(i, j int) bool { return w.grants[i].at < w.grants[j].at })
	epochs := map[uint64]int{}
	for i, g := range w.grants {
		epochs[api.TokenEpoch(g.token)]++
		if i > 0 && g.token <= w.grants[i-1].token {
			t.Errorf("token %d (epoch %d) granted after %d (epoch %d)", g.token, api.TokenEpoch(g.token), w.grants[i-1].token, api.TokenEpoch(w.grants[i-1].token))
		}
	}
	t.Logf("grants by token epoch: %v", epochs)
	if len(w.grants) == 0 || api.TokenEpoch(w.grants[len(w.grants)-1].token) != 4 {
		t.Errorf("no grant after the third move (epoch 4): %v", epochs)
	}

	for i := 0; i < seeded; i++ {
		n, err := admin.Get(ctx, fmt.Sprintf("/demo/cfg/k%03d", i))
		must(t, err)
		if n.Version != 1 || !bytes.Equal(n.Value, bytes.Repeat([]byte{byte('a' + i%26)}, 100)) {
			t.Fatalf("k%03d after three moves: version %d value %q", i, n.Version, n.Value)
		}
	}
	ctr, err := admin.Get(ctx, "/demo/ctr")
	must(t, err)
	var v int
	fmt.Sscan(string(ctr.Value), &v)
	if v < w.casOK || v > w.casOK+w.casMaybe || ctr.Version != uint64(v)+1 {
		t.Errorf("counter %d at version %d: %d increments acknowledged, %d unknown", v, ctr.Version, w.casOK, w.casMaybe)
	}

	// A client whose directory still names payments is answered moved,
	// naming the cell /demo went to; its SDK follows (admin.Get above
	// went through the same path for the first two moves).
	if got := askCell(t, c, "payments", api.RouteGet, api.ReadRequest{Path: "/demo/ctr"}); got.Code != api.CodeMoved || got.Cell != "demo" {
		t.Errorf("a read of /demo at payments: %+v, want moved to demo", got)
	}
	if pi, _ := admin.Directory().Prefix("/demo"); pi.Cell != "demo" || pi.Epoch != 4 || pi.Migration != nil {
		t.Errorf("directory entry after the moves: %+v", pi)
	}
}

// askCell sends one request for cell to each lockd until the cell's
// leader answers, and returns its error (nil on success).
func askCell(t *testing.T, c *cluster.Cluster, cell, route string, req any) *api.Error {
	t.Helper()
	b, _ := json.Marshal(req)
	for attempt := 0; attempt < 100; attempt++ {
		for _, ep := range c.Endpoints() {
			hr, _ := http.NewRequest("POST", "http://"+ep+route, bytes.NewReader(b))
			hr.Header.Set(api.HeaderCell, cell)
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				continue
			}
			var er api.ErrorResponse
			_ = json.NewDecoder(resp.Body).Decode(&er)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			if er.Error != nil && er.Error.Code != api.CodeNotLeader && er.Error.Code != api.CodeUnavailable && er.Error.Code != api.CodeWrongCell {
				return er.Error
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no leader of %s answered", cell)
	return nil
}

// prefixStates asks every cell for the prefix's state there.
// stateClient bounds each prefix-state request of prefixStates (a lockd
// may hold one for its own RequestTimeout).
var stateClient = &http.Client{Timeout: 10 * time.Second}

func prefixStates(t *testing.T, c *cluster.Cluster, cl *sdk.Client, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, cell := range cl.Directory().Cells {
		b, _ := json.Marshal(api.PrefixOpRequest{Cell: cell.Name, Prefix: prefix, Op: api.PrefixState})
		for attempt := 0; attempt < 200; attempt++ {
			var got *api.PrefixOpResponse
			for _, ep := range c.Endpoints() {
				resp, err := stateClient.Post("http://"+ep+api.RouteAdminPrefixOp, "application/json", bytes.NewReader(b))
				if err != nil {
					continue
				}
				var r api.PrefixOpResponse
				if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&r) == nil {
					got = &r
				}
				resp.Body.Close()
				if got != nil {
					break
				}
			}
			if got != nil {
				out[cell.Name] = got.State
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return out
}

// oneOwner checks that exactly one cell serves prefix (the one the
// directory names) and that no migration is left in flight.
func oneOwner(t *testing.T, c *cluster.Cluster, cl *sdk.Client, prefix, want string) {
	t.Helper()
	// Generous: after a kill -9 every cell may be electing, and make test
	// runs other packages' clusters on the same two cores (20 s ran out
	// there, twice, while the test alone takes 17 s in all).
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	must(t, cl.RefreshDirectory(ctx))
	pi, _ := cl.Directory().Prefix(prefix)
	if pi.Cell != want || pi.Migration != nil {
		t.Fatalf("directory: %s on %s, migration %+v; want on %s with none in flight", prefix, pi.Cell, pi.Migration, want)
	}
	// The new owner may take a moment to read the directory and serve.
	var states map[string]string
	for attempt := 0; attempt < 100; attempt++ {
		states = prefixStates(t, c, cl, prefix)
		if states[want] == "serving" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	serving := 0
	for cell, st := range states {
		if st == "serving" {
			serving++
			if cell != want {
				t.Errorf("%s is served by %s too", prefix, cell)
			}
		}
	}
	if serving != 1 || states[want] != "serving" {
		t.Fatalf("%s: states %v; want exactly %s serving", prefix, states, want)
	}
	_, err := cl.Put(ctx, prefix+"/after", []byte("x"), sdk.MakeParents())
	must(t, err)
}

// leaderByStatus is the lockd leading cell (or the directory, cell ""),
// from the lockds' own status.
func leaderByStatus(t *testing.T, c *cluster.Cluster, cell string) int {
	t.Helper()
	for attempt := 0; attempt < 200; attempt++ {
		ctx, cancel := ctxFor(5 * time.Second)
		sts := c.Statuses(ctx)
		cancel()
		for id, st := range sts {
			if cell == "" && st.DirectoryLeader != 0 {
				return int(st.DirectoryLeader)
			}
			for _, rs := range st.Cells {
				if rs.Cell == cell && rs.Role == "leader" {
					return id
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no leader of %q", cell)
	return 0
}

// TestMigrationSurvivesCrashes interrupts migrations with a kill -9 of the
// old cell's leader, of the new cell's leader, of the directory's leader
// and of the migrating lockctl, each at a different step; every one ends
// with exactly one cell serving the prefix: lockctl migrate resumes from
// the directory's record, or --abort rolls back.
func TestMigrationSurvivesCrashes(t *testing.T) {
	// Not parallel: it kills lockctl as soon as it prints "sealed" and
	// expects the move still sealing; under other clusters' load the kill
	// can land after lockctl copied and committed (seen once).
	c, admin := manyCells(t)
	lockctl := cluster.Build(t, "./ctl/cmd/lockctl")
	ctx, cancel := ctxFor(4 * time.Minute)
	defer cancel()
	for i := 0; i < 50; i++ {
		_, err := admin.Put(ctx, fmt.Sprintf("/demo/v/k%02d", i), []byte(fmt.Sprint(i)), sdk.MakeParents())
		must(t, err)
	}
	// A restart still waiting for its lockd to be healthy when the test
	// ends would see the cleanup's kill: the test waits for them first.
	var restarts sync.WaitGroup
	defer restarts.Wait()
	restartLater := func(id int) {
		t.Helper()
		must(t, c.Kill(id))
		t.Logf("killed lockd %d", id)
		restarts.Go(func() {
			time.Sleep(500 * time.Millisecond)
			if err := c.Restart(id); err != nil {
				t.Errorf("restart lockd %d: %v", id, err)
			}
		})
	}
	steps := []struct {
		to, killAt, whom string
	}{
		{"cell3", "sealed", "old cell's leader"},
		{"payments", "copying", "new cell's leader"},
		{"demo", "committed", "directory's leader"},
	}
	for _, s := range steps {
		pi, _ := admin.Directory().Prefix("/demo")
		killed := false
		_, err := admin.MovePrefix(ctx, "/demo", s.to, func(p sdk.MoveProgress) {
			if p.Step != s.killAt || killed {
				return
			}
			killed = true
			switch s.whom {
			case "old cell's leader":
				restartLater(leaderByStatus(t, c, pi.Cell))
			case "new cell's leader":
				restartLater(leaderByStatus(t, c, s.to))
			default:
				restartLater(leaderByStatus(t, c, ""))
			}
		})
		if err != nil {
			t.Fatalf("move to %s with the %s killed at %s: %v", s.to, s.whom, s.killAt, err)
		}
		oneOwner(t, c, admin, "/demo", s.to)
		t.Logf("move to %s survived a kill -9 of the %s at %q", s.to, s.whom, s.killAt)
	}

	// The migrating client dies after the seal: the prefix is served by
	// nobody (writes wait) until lockctl migrate resumes it, or --abort
	// gives it back to the old cell.
	for _, finish := range []string{"resume", "abort"} {
		p := startLineProc(t, "lockctl-migrate", lockctl, "--endpoints", strings.Join(c.Endpoints(), ","), "--timeout", "60s", "migrate", "/demo", "--to", "cell3")
		p.await("[", 30*time.Second) // begun
		p.await("[", 30*time.Second) // sealed
		p.kill()
		must(t, admin.RefreshDirectory(ctx))
		pi, _ := admin.Directory().Prefix("/demo")
		if pi.Migration == nil || pi.Migration.Phase != api.MigrationSealing {
			t.Fatalf("after killing lockctl at the seal: %+v", pi)
		}
		args := []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--timeout", "60s", "migrate", "/demo"}
		want := "cell3"
		if finish == "abort" {
			args, want = append(args, "--abort"), "demo"
		} else {
			// Another lockctl's migration: taken over explicitly (issue 23).
			args = append(args, "--to", "cell3", "--take-over")
		}
		out, err := runBounded(t, time.Minute, lockctl, args...)
		if err != nil {
			t.Fatalf("lockctl migrate %s: %v\n%s", finish, err, out)
		}
		oneOwner(t, c, admin, "/demo", want)
		t.Logf("killed lockctl after the seal; %s: /demo on %s", finish, want)
		if finish == "resume" {
			_, err := admin.MovePrefix(ctx, "/demo", "demo", nil)
			must(t, err)
		}
	}
	for i := 0; i < 50; i++ {
		n, err := admin.Get(ctx, fmt.Sprintf("/demo/v/k%02d", i))
		must(t, err)
		if string(n.Value) != fmt.Sprint(i) || n.Version != 1 {
			t.Fatalf("k%02d: %q version %d", i, n.Value, n.Version)
		}
	}
}

// TestMigrationBadInput: every refusal names its reason and changes
// nothing.
func TestMigrationBadInput(t *testing.T) {
	t.Parallel()
	c, admin := manyCells(t)
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	before := admin.Directory()
	cases := []struct {
		name string
		do   func() error
		code api.Code
	}{
		{"unknown prefix", func() error { _, err := admin.MovePrefix(ctx, "/nope", "cell3", nil); return err }, api.CodeNotFound},
		{"unknown cell", func() error { _, err := admin.MovePrefix(ctx, "/demo", "nope", nil); return err }, api.CodeNotFound},
		{"to the same cell", func() error { _, err := admin.MovePrefix(ctx, "/demo", "demo", nil); return err }, api.CodeConflict},
		{"assign a served prefix", func() error { _, err := admin.AssignPrefix(ctx, "/demo", "cell3"); return err }, api.CodeConflict},
		{"assign to an unknown cell", func() error { _, err := admin.AssignPrefix(ctx, "/x", "nope"); return err }, api.CodeNotFound},
		{"two replicas on one lockd", func() error {
			_, err := admin.CreateCell(ctx, api.CreateCellRequest{Name: "twice", On: []uint64{1, 1, 2}})
			return err
		}, api.CodeConflict},
		{"a cell that exists", func() error { _, err := admin.CreateCell(ctx, api.CreateCellRequest{Name: "demo"}); return err }, api.CodeConflict},
		{"abort with nothing in flight", func() error { return admin.AbortMove(ctx, "/demo") }, api.CodeConflict},
	}
	for _, tc := range cases {
		if err := tc.do(); api.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	must(t, admin.RefreshDirectory(ctx))
	after := admin.Directory()
	after.Index, before.Index = 0, 0
	a, _ := json.Marshal(after)
	b, _ := json.Marshal(before)
	if !bytes.Equal(a, b) {
		t.Errorf("refused commands changed the directory:\n%s\n%s", b, a)
	}

	// A second migration while one is in flight is refused.
	began := make(chan struct{})
	go func() {
		_, _ = admin.MovePrefix(ctx, "/demo", "cell3", func(p sdk.MoveProgress) {
			if p.Step == "sealed" {
				close(began)
				time.Sleep(2 * time.Second)
			}
		})
	}()
	<-began
	other := newSDKClient(t, c)
	if _, err := other.MovePrefix(ctx, "/demo", "payments", nil); api.CodeOf(err) != api.CodeConflict {
		t.Errorf("a second migration in flight: %v", err)
	}
}
