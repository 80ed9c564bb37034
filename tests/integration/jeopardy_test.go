package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// Jeopardy timing: a short lease and grace so the two cases take seconds.
const (
	jeopardyLease = 3 * time.Second
	jeopardyGrace = 4 * time.Second
)

// TestJeopardy: a lock holder whose cell becomes unreachable (every replica
// SIGSTOPped) is told SessionJeopardy before the cell could have freed its
// lease, and the lock's Context is cancelled at once. If the cell comes
// back inside the grace period the session is SessionSafe with the same
// node and token and Context is live again; if not, SessionExpired, the
// lock is lost (ErrLockLost) and a new holder gets a higher token.
func TestJeopardy(t *testing.T) {
	// Not parallel: it asserts the SDK enters jeopardy before the cell can
	// expire its session, a bound on the client's timers, which other
	// clusters' load on the machine would blur.
	c := cluster.Start(t, cluster.Options{})
	t.Run("SafeWithinGrace", func(t *testing.T) { testJeopardySafe(t, c) })
	t.Run("ExpiredAfterGrace", func(t *testing.T) { testJeopardyExpired(t, c) })
}

// jeopardyHolder is a client with a short lease and grace that holds a lock,
// and its session's events.
type jeopardyHolder struct {
	cl     *sdk.Client
	m      *sdk.Mutex
	s      *sdk.Session
	events chan sdk.SessionEvent
	node   string
	token  uint64
	ctx    context.Context // m.Context() at the grant
}

func holdForJeopardy(t *testing.T, c *cluster.Cluster, path string) *jeopardyHolder {
	t.Helper()
	if _, err := c.WaitLeaders(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	cl, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), Lease: jeopardyLease, Grace: jeopardyGrace})
	must(t, err)
	t.Cleanup(func() { cl.Close() })
	h := &jeopardyHolder{cl: cl, m: cl.NewMutex(path), events: make(chan sdk.SessionEvent, 64)}
	must(t, h.m.Lock(ctx))
	h.s, err = cl.Session(ctx, "demo")
	must(t, err)
	if h.s.Lease() != jeopardyLease {
		t.Fatalf("lease %v, asked for %v", h.s.Lease(), jeopardyLease)
	}
	go func() {
		for ev := range h.s.Events() {
			h.events <- ev
		}
		close(h.events)
	}()
	h.node, h.token, h.ctx = h.m.Node(), h.m.Token(), h.m.Context()
	if h.ctx.Err() != nil || h.token == 0 {
		t.Fatalf("grant: token %d, context %v", h.token, h.ctx.Err())
	}
	return h
}

// await returns the next session event of type typ within d, skipping
// Failover (informational) and failing on any other.
func (h *jeopardyHolder) await(t *testing.T, typ sdk.SessionEventType, d time.Duration) sdk.SessionEvent {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-h.events:
			if !ok {
				t.Fatalf("session events closed while waiting for %s (session err %v)", typ, h.s.Err())
			}
			t.Logf("session event %s at %s", ev.Type, ev.Time.Format("15:04:05.000"))
			if ev.Type == typ {
				return ev
			}
			if ev.Type != sdk.SessionFailover {
				t.Fatalf("session event %s while waiting for %s", ev.Type, typ)
			}
		case <-timer.C:
			t.Fatalf("no %s event within %v", typ, d)
		}
	}
}

// pauseAll SIGSTOPs every replica: the cell is unreachable, and its lease
// clocks (CLOCK_MONOTONIC) keep running.
func pauseAll(t *testing.T, c *cluster.Cluster) time.Time {
	t.Helper()
	for _, id := range c.IDs() {
		must(t, c.Pause(id))
	}
	return time.Now()
}

// awaitJeopardy checks the jeopardy event against the cell's lease: the
// cell extends a lease from a KeepAlive's receipt, never before its send,
// so it cannot free the session before lastConfirmedSend + lease.
func (h *jeopardyHolder) awaitJeopardy(t *testing.T, paused time.Time) sdk.SessionEvent {
	t.Helper()
	ev := h.await(t, sdk.SessionJeopardy, 2*jeopardyLease)
	// After jeopardy nothing confirms the lease until Safe, so LocalExpiry
	// is the one the watchdog judged by.
	cellEarliest := h.s.LocalExpiry().Add(sdk.DriftMargin(jeopardyLease))
	if !ev.Time.Before(cellEarliest) {
		t.Fatalf("jeopardy at %s, not before the cell's earliest expiry %s", ev.Time.Format("15:04:05.000"), cellEarliest.Format("15:04:05.000"))
	}
	if ev.Time.After(paused.Add(jeopardyLease + time.Second)) { // sanity only
		t.Fatalf("jeopardy %v after the pause, a second later than a lease", ev.Time.Sub(paused))
	}
	select {
	case <-h.ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("lock context not cancelled at jeopardy")
	}
	if !h.s.InJeopardy() || h.m.Context().Err() == nil || h.s.LeaseContext().Err() == nil {
		t.Fatal("in jeopardy, but the session or lock still looks certain")
	}
	t.Logf("jeopardy %v after the pause, %v before the cell could free the lease",
		ev.Time.Sub(paused).Round(time.Millisecond), cellEarliest.Sub(ev.Time).Round(time.Millisecond))
	return ev
}

// The cell returns inside the grace period: the paused leader stays
// stopped, the other four resume and elect a new leader, which gives every
// session a full lease. The session is Safe with the same node and token,
// and Context is live again. Then the deposed leader resumes: its own
// stale lease clock must not expire the session (its expiry carries an old
// leader epoch and is refused).
func testJeopardySafe(t *testing.T, c *cluster.Cluster) {
	h := holdForJeopardy(t, c, "/demo/jeopardy/safe")
	leader, err := c.LeaderOf("demo")
	must(t, err)
	paused := pauseAll(t, c)
	defer func() {
		for _, id := range c.IDs() {
			if c.Paused(id) {
				_ = c.Resume(id)
			}
		}
	}()
	jeo := h.awaitJeopardy(t, paused)

	for _, id := range c.IDs() {
		if id != leader {
			must(t, c.Resume(id))
		}
	}
	safe := h.await(t, sdk.SessionSafe, jeopardyGrace+time.Second)
	if safe.Time.Sub(jeo.Time) >= jeopardyGrace {
		t.Fatalf("safe %v after jeopardy, beyond the %v grace", safe.Time.Sub(jeo.Time), jeopardyGrace)
	}
	t.Logf("safe %v after jeopardy (grace %v)", safe.Time.Sub(jeo.Time).Round(time.Millisecond), jeopardyGrace)
	checkStillHeld(t, h)
	if h.ctx.Err() == nil {
		t.Fatal("the context from before the jeopardy came back to life")
	}

	// The deposed leader resumes with its lease clock far past the
	// session's expiry; a lease later the session and lock are intact.
	must(t, c.Resume(leader))
	time.Sleep(jeopardyLease)
	if err := h.s.Err(); err != nil {
		t.Fatalf("session ended after the deposed leader resumed: %v", err)
	}
	checkStillHeld(t, h)
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	must(t, h.m.Unlock(ctx))
}

func checkStillHeld(t *testing.T, h *jeopardyHolder) {
	t.Helper()
	if h.m.Node() != h.node || h.m.Token() != h.token || !h.m.Held() {
		t.Fatalf("node %q token %d held %v; want %q %d", h.m.Node(), h.m.Token(), h.m.Held(), h.node, h.token)
	}
	if err := h.m.Context().Err(); err != nil {
		t.Fatalf("lock context not live: %v", err)
	}
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	st, _, err := h.cl.LockState(ctx, h.node, false)
	must(t, err)
	if !st.Exists || !st.Held || st.Token != h.token {
		t.Fatalf("the cell says %+v for %s, want held with token %d", st, h.node, h.token)
	}
}

// The cell stays away past the grace period: the session is Expired, the
// lock lost, and once the cell is back a new holder gets a higher token.
func testJeopardyExpired(t *testing.T, c *cluster.Cluster) {
	const path = "/demo/jeopardy/expired"
	h := holdForJeopardy(t, c, path)
	paused := pauseAll(t, c)
	defer func() {
		for _, id := range c.IDs() {
			if c.Paused(id) {
				_ = c.Resume(id)
			}
		}
	}()
	jeo := h.awaitJeopardy(t, paused)
	exp := h.await(t, sdk.SessionExpired, jeopardyGrace+5*time.Second)
	if d := exp.Time.Sub(jeo.Time); d < jeopardyGrace-50*time.Millisecond {
		t.Fatalf("expired %v after jeopardy, before the %v grace ran out", d, jeopardyGrace)
	}
	t.Logf("expired %v after jeopardy (grace %v): %v", exp.Time.Sub(jeo.Time).Round(time.Millisecond), jeopardyGrace, exp.Err)
	if !errors.Is(h.s.Err(), sdk.ErrSessionExpired) {
		t.Errorf("session error %v, want session_expired", h.s.Err())
	}
	if h.m.Held() || h.m.Context().Err() == nil || h.ctx.Err() == nil {
		t.Fatal("lock held or its context live after the session expired")
	}
	// Unlock at once, the cell still unreachable: the lock is lost, and
	// Unlock says so without waiting for the cell.
	uctx, ucancel := ctxFor(callTimeout)
	defer ucancel()
	unlockStart := time.Now()
	if err := h.m.Unlock(uctx); !errors.Is(err, sdk.ErrLockLost) {
		t.Fatalf("Unlock after expiry: %v after %v, want ErrLockLost", err, time.Since(unlockStart).Round(time.Millisecond))
	}

	// The cell returns; its leader expires the session (its lease ran out
	// on the cell's clock too) and the lock goes to the next holder.
	for _, id := range c.IDs() {
		must(t, c.Resume(id))
	}
	resumed := time.Now()
	ctx, cancel := ctxFor(60 * time.Second)
	defer cancel()
	next := newSDK(t, c, jeopardyLease).NewMutex(path)
	must(t, next.Lock(ctx))
	t.Logf("a new holder got the lock %v after the cell returned, token %d > %d",
		time.Since(resumed).Round(time.Millisecond), next.Token(), h.token)
	if next.Token() <= h.token {
		t.Fatalf("new holder's token %d not above the expired holder's %d", next.Token(), h.token)
	}
	must(t, next.Unlock(ctx))
	// The expired client acquires again on a new session, with a higher token.
	again := h.cl.NewMutex(path)
	must(t, again.Lock(ctx))
	if again.Token() <= next.Token() {
		t.Fatalf("re-acquired token %d not above %d", again.Token(), next.Token())
	}
	must(t, again.Unlock(ctx))
}
