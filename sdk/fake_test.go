package sdk

// The sdk unit tests' view of the shared fake cell (tests/fake): thin
// adapters to this package's types (watchKey) and lower-case helpers.

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/fake"
	"go.uber.org/goleak"
)

type fakeReq struct {
	replica int
	route   string
	body    []byte
	auth    string
	dirIdx  string // api.HeaderDirectoryIndex
}

// hookFunc intercepts a request; next runs the fake's own handling.
type hookFunc = fake.Hook

type fakeCell struct {
	*fake.Cell
	name string
}

// newFakeCell starts a fake cell on the in-memory network (clients made
// by newTestClient dial it through fc.Dial), so a test may run it in a
// synctest bubble.
func newFakeCell(t testing.TB, replicas int) *fakeCell {
	t.Helper()
	return startFakeCell(t, fake.Options{Replicas: replicas, Memory: true})
}

// newTCPFakeCell starts a fake cell on loopback ports, for the probes
// (FetchStatus), which dial TCP only.
func newTCPFakeCell(t testing.TB, replicas int) *fakeCell {
	t.Helper()
	return startFakeCell(t, fake.Options{Replicas: replicas})
}

// bubble runs f in a synctest bubble: time there advances only when
// every goroutine in it waits, so leases, grace periods and lock-delays
// pass at once and exactly. Make the fake inside f (newFakeCell).
//
// A leak check in the bubble (verifyNoBubbleLeaks) sees only goroutines
// started after the bubble: goleak's retries sleep in the bubble's time,
// which does not pass for a goroutine outside it (an earlier real-time
// test's idle-connection cleaner ending its last 100 ms sleep), so such a
// goroutine would be reported however long it had left. TestMain's check
// still covers those.
func bubble(t *testing.T, f func(t *testing.T)) {
	before := goleak.IgnoreCurrent()
	synctest.Test(t, func(t *testing.T) {
		bubbleBefore.Store(t, before)
		t.Cleanup(func() { bubbleBefore.Delete(t) })
		// Runs last, after the clients and the fake have closed: time
		// stops once f returns, so let the fasthttp janitors (the client's
		// idle-connection cleaner, the server's worker-pool cleaner) sleep
		// out their last round and end.
		t.Cleanup(func() { time.Sleep(time.Second) })
		f(t)
	})
}

func startFakeCell(t testing.TB, o fake.Options) *fakeCell {
	t.Helper()
	c, err := fake.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &fakeCell{Cell: c, name: c.Name()}
}

func (fc *fakeCell) addr(i int) string      { return fc.Addr(i) }
func (fc *fakeCell) close()                 { fc.Close() }
func (fc *fakeCell) setHook(h hookFunc)     { fc.SetHook(h) }
func (fc *fakeCell) failover(newLeader int) { fc.Failover(newLeader) }
func (fc *fakeCell) expire(id uint64)       { fc.Expire(id) }
func (fc *fakeCell) armed(id uint64, k watchKey) bool {
	return fc.Armed(id, fake.WatchKey{Path: k.path, Kind: k.kind})
}
func (fc *fakeCell) handle(rep int, route string, body []byte) (int, any) {
	return fc.Handle(rep, route, body)
}

func (fc *fakeCell) requests(route string) []fakeReq {
	var out []fakeReq
	for _, r := range fc.Requests(route) {
		out = append(out, fakeReq{replica: r.Replica, route: r.Route, body: r.Body, auth: r.Auth, dirIdx: r.DirIndex})
	}
	return out
}

// watches lists the watches the fake holds for a session.
func (fc *fakeCell) watches(id uint64) []watchKey {
	var out []watchKey
	for _, k := range fc.Watches(id) {
		out = append(out, watchKey{k.Path, k.Kind})
	}
	return out
}

func fail(code api.Code, format string, args ...any) (int, any) {
	return fake.Fail(code, format, args...)
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	a, err := fake.DeadAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", strings.TrimSpace(string(b)), err)
	}
	return v
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// bubbleBefore maps a bubble's *testing.T to the goroutines that were
// running when it started.
var bubbleBefore sync.Map

// verifyNoBubbleLeaks fails t if a goroutine started in its bubble is
// still running.
func verifyNoBubbleLeaks(t *testing.T) {
	t.Helper()
	opts := slices.Clip(bubbleLeakOpts)
	if before, ok := bubbleBefore.Load(t); ok {
		opts = append(opts, before.(goleak.Option))
	}
	goleak.VerifyNone(t, opts...)
}
