package cell

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// fakeRead answers sessionsQuery rounds: sessions in dead are unknown, and
// every round is recorded; gate, if set, holds each round until released.
type fakeRead struct {
	mu     sync.Mutex
	rounds []sessionsQuery
	dead   map[uint64]bool
	gate   chan struct{}
	err    error
}

func (f *fakeRead) read(ctx context.Context, sq sessionsQuery) (sessionsResult, error) {
	f.mu.Lock()
	f.rounds = append(f.rounds, sq)
	n := uint64(len(f.rounds))
	gate, err := f.gate, f.err
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return sessionsResult{}, ctx.Err()
		}
	}
	if err != nil {
		return sessionsResult{}, err
	}
	r := sessionsResult{index: 100 + n, errs: make([]error, len(sq))}
	for i, c := range sq {
		if f.dead[c.session] {
			r.errs[i] = api.Errorf(api.CodeSessionExpired, "dead")
		}
	}
	return r, nil
}

func (f *fakeRead) roundsSeen() []sessionsQuery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sessionsQuery(nil), f.rounds...)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Idle KeepAlives arriving together share one ReadIndex round, and each
// gets its own session's answer from it.
func TestIdleKeepAlivesShareOneRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRead{dead: map[uint64]bool{7: true}}
		b := newConfirmer(f.read, 200*time.Millisecond)
		defer b.close()
		ctx := testCtx(t)
		const n = 50
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, errs[i] = b.confirm(ctx, uint64(i), 1, false)
			}(i)
		}
		wg.Wait()
		if r := len(f.roundsSeen()); r > 2 {
			t.Fatalf("%d idle KeepAlives took %d ReadIndex rounds, want 1 (2 if the window closed mid-burst)", n, r)
		}
		for i, err := range errs {
			if dead := i == 7; dead != errors.Is(err, api.ErrSessionExpired) || !dead && err != nil {
				t.Errorf("session %d: err %v", i, err)
			}
		}
	})
}

// A reply with events does not wait for the idle window.
func TestUrgentKeepAliveDoesNotWaitForTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRead{}
		b := newConfirmer(f.read, time.Hour)
		defer b.close()
		idle := make(chan error, 1)
		go func() { _, err := b.confirm(testCtx(t), 1, 1, false); idle <- err }()
		synctest.Wait() // the idle one is queued
		// The urgent one (and the idle one queued before it) are answered in
		// a round now, not after the hour.
		if _, err := b.confirm(testCtx(t), 2, 1, true); err != nil {
			t.Fatalf("urgent confirm: %v", err)
		}
		synctest.Wait()
		select {
		case err := <-idle:
			if err != nil {
				t.Fatalf("idle confirm: %v", err)
			}
		default:
			t.Fatal("the idle confirm queued before the urgent round was not answered by it")
		}
	})
}

// A round that began before a KeepAlive renewed its lease proves nothing
// about leadership after the renewal: the KeepAlive waits for the next one.
func TestRoundStartedBeforeTheCallDoesNotConfirmIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRead{gate: make(chan struct{})}
		b := newConfirmer(f.read, time.Millisecond)
		defer b.close()
		ctx := testCtx(t)
		first := make(chan error, 1)
		go func() { _, err := b.confirm(ctx, 1, 1, true); first <- err }()
		synctest.Wait()
		if len(f.roundsSeen()) == 0 {
			t.Fatal("the first round never started")
		}
		second := make(chan uint64, 1)
		go func() {
			idx, err := b.confirm(ctx, 2, 1, true)
			if err != nil {
				t.Error(err)
			}
			second <- idx
		}()
		synctest.Wait() // let the second call queue
		close(f.gate)   // both rounds may now finish
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if idx := <-second; idx != 102 {
			t.Fatalf("second KeepAlive answered by round index %d, want 102 (the round after it arrived)", idx)
		}
		rounds := f.roundsSeen()
		if len(rounds) != 2 || len(rounds[0]) != 1 || rounds[0][0].session != 1 || rounds[1][0].session != 2 {
			t.Fatalf("rounds %v, want [[1] [2]]", rounds)
		}
	})
}

// A round that fails (leadership lost, timeout) fails every KeepAlive in it.
func TestFailedRoundFailsEveryone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRead{err: api.Errorf(api.CodeNotLeader, "deposed")}
		b := newConfirmer(f.read, time.Millisecond)
		defer b.close()
		for i := uint64(1); i <= 3; i++ {
			if _, err := b.confirm(testCtx(t), i, 1, false); !errors.Is(err, api.ErrNotLeader) {
				t.Fatalf("session %d: err %v, want not_leader", i, err)
			}
		}
	})
}

// The state's answer to a batch: a live session gets a nil error (not a
// typed nil, which the HTTP layer would take for a failure), an ended or
// unknown one session_expired or no_session, and a stale epoch not_leader.
func TestSessionsQueryAnswersEachSession(t *testing.T) {
	r := newTestReplica(t, 1, nil)
	r.c.leaderID.Store(1)
	r.c.term.Store(5)
	r.apply(fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: 1, Term: 5})
	live := r.apply(fsm.Command{Op: fsm.OpOpenSession}).Session
	closed := r.apply(fsm.Command{Op: fsm.OpOpenSession}).Session
	r.apply(fsm.Command{Op: fsm.OpCloseSession, WriteHeader: api.WriteHeader{Session: closed}})
	epoch := r.m.state.Epoch()
	v, err := r.m.Lookup(erase(sessionsQuery{{live, epoch}, {closed, epoch}, {live, epoch + 1}, {999, epoch}}.run))
	if err != nil {
		t.Fatal(err)
	}
	res := v.(sessionsResult)
	if res.index != r.m.state.Index() {
		t.Errorf("index %d, want %d", res.index, r.m.state.Index())
	}
	if res.errs[0] != nil {
		t.Errorf("live session: %#v, want a nil error", res.errs[0])
	}
	if res.errs[1] == nil || res.errs[3] == nil {
		t.Errorf("closed %v, unknown %v: want errors", res.errs[1], res.errs[3])
	}
	if !errors.Is(res.errs[2], api.ErrNotLeader) {
		t.Errorf("stale epoch: %v, want not_leader", res.errs[2])
	}
}
