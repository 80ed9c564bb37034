package cell

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cachers"
	"github.com/lockservice/lockd/server/fsm"
	"github.com/lockservice/lockd/server/session"
	"github.com/lockservice/lockd/server/watch"
)

// testReplica is one replica's adapter and soft state without dragonboat:
// entries are fed to the machine as the Raft log would.
type testReplica struct {
	t   *testing.T
	c   *Cell
	m   *machine
	idx uint64
}

func newTestReplica(t *testing.T, replica uint64, now func() time.Time) *testReplica {
	t.Helper()
	c := &Cell{cfg: Config{ReplicaID: replica, Info: api.CellInfo{Name: "test"}}, log: slog.Default(), stop: make(chan struct{}), clock: session.NewLeaderClock(now), changed: make(chan struct{})}
	c.sessions = session.New(session.Config{
		Expire:     func(context.Context, uint64, uint64) error { return nil },
		CheckEvery: time.Hour, TickEvery: time.Hour,
	})
	c.watches = watch.NewTable(c.sessions)
	c.cachers = cachers.New()
	c.confirms = newConfirmer(c.readSessions, confirmWindow)
	c.delays = newLockDelays(c.log, func(context.Context, string, uint64) error { return nil })
	t.Cleanup(c.Close)
	return &testReplica{t: t, c: c, m: &machine{cell: c, state: fsm.New()}}
}

func (r *testReplica) apply(cmd fsm.Command) fsm.Result {
	r.t.Helper()
	r.idx++
	out, err := r.m.Update([]sm.Entry{{Index: r.idx, Cmd: r.c.encodeProposal(&cmd)}})
	if err != nil {
		r.t.Fatal(err)
	}
	res, err := fsm.DecodeResult(out[0].Result.Data)
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

// A leader_start retried after a timeout can commit twice for one replica
// and term. The second copy must leave the running leadership alone: its
// leases (a parked KeepAlive stays parked) and its armed watches.
func TestDuplicateLeaderStartKeepsRunningLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTestReplica(t, 1, nil)
		r.c.leaderID.Store(1)
		r.c.term.Store(5)
		start := fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: 1, Term: 5}
		r.apply(start)
		r.apply(fsm.Command{Op: fsm.OpEnsurePrefix, Path: "/demo", Epoch: 1})
		id := r.apply(fsm.Command{Op: fsm.OpOpenSession}).Session
		r.c.watches.Register(id, "", "/demo/x", api.WatchData)

		type reply struct {
			evs []api.Event
			err error
		}
		replies := make(chan reply, 1)
		go func() {
			evs, _, err := r.c.sessions.KeepAlive(context.Background(), id, time.Minute)
			replies <- reply{evs, err}
		}()
		synctest.Wait() // let it park (if it has not, it returns the event below at once)

		if res := r.apply(start); res.Err != nil {
			t.Fatalf("duplicate leader_start refused: %v", res.Err)
		}
		synctest.Wait()
		select {
		case rep := <-replies:
			t.Fatalf("duplicate leader_start released the parked keepalive: events %v, err %v", rep.evs, rep.err)
		default:
		}
		// A leader_start from an older term (a stale announce) is refused and
		// must not stop the running manager either.
		if res := r.apply(fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: 1, Term: 4}); res.Err == nil {
			t.Fatal("leader_start from an older term accepted")
		}
		if active, epoch := r.c.sessions.Active(); !active || epoch != r.m.state.Epoch() {
			t.Fatalf("manager active %v epoch %d after duplicate leader_start; state epoch %d", active, epoch, r.m.state.Epoch())
		}
		r.apply(fsm.Command{Op: fsm.OpPut, Path: "/demo/x", Value: []byte("v")})
		synctest.Wait()
		select {
		case rep := <-replies:
			if rep.err != nil || len(rep.evs) != 1 || rep.evs[0].Path != "/demo/x" {
				t.Fatalf("keepalive after duplicate leader_start: events %v, err %v; want the /demo/x event", rep.evs, rep.err)
			}
		default:
			t.Fatal("watch armed before the duplicate leader_start did not fire")
		}
	})
}

// A replica that becomes leader reports in its leader_start how long the
// previous leadership lasted since it applied that leadership's
// leader_start (less 2 % for drift); the state charges it to sessions that
// did not renew. A replica without that record (restored from a snapshot)
// reports nothing.
func TestLeaderStartReportsPreviousLeadership(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	a, b := newTestReplica(t, 1, clock), newTestReplica(t, 2, clock)
	both := func(cmd fsm.Command) {
		t.Helper()
		if ra, rb := a.apply(cmd), b.apply(cmd); ra.Err != nil || rb.Err != nil {
			t.Fatalf("%s: %v, %v", cmd.Op, ra.Err, rb.Err)
		}
	}
	a.c.leaderID.Store(1)
	a.c.term.Store(1)
	both(a.c.leaderStartCmd(1))
	both(fsm.Command{Op: fsm.OpEnsurePrefix, Path: "/demo", Epoch: 1})
	both(fsm.Command{Op: fsm.OpOpenSession})
	dead := a.idx
	epoch := a.m.state.Epoch()
	// Leadership 2 (replica 2) lasts 750 ms and never ticks; then 1 s of election.
	now = now.Add(10 * time.Second)
	b.c.leaderID.Store(2)
	b.c.term.Store(2)
	both(b.c.leaderStartCmd(2))
	now = now.Add(1750 * time.Millisecond)
	cmd := a.c.leaderStartCmd(3)
	if cmd.Epoch != epoch+1 || cmd.PrevLeadershipMS != 1715 {
		t.Fatalf("leader_start reports epoch %d, %d ms; want %d, 1715", cmd.Epoch, cmd.PrevLeadershipMS, epoch+1)
	}

	var snap bytes.Buffer
	if err := b.m.state.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	c := newTestReplica(t, 3, clock)
	if err := c.m.RecoverFromSnapshot(&snap, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.c.leaderStartCmd(3); got.PrevLeadershipMS != 0 {
		t.Fatalf("replica restored from a snapshot reports %d ms", got.PrevLeadershipMS)
	}

	both(cmd)
	for _, info := range a.m.state.Sessions() {
		if info.ID == dead {
			if info.SilentMS != 1715 {
				t.Fatalf("session silent for the 750 ms leadership charged %d ms, want 1715", info.SilentMS)
			}
			return
		}
	}
	t.Fatalf("session %d gone", dead)
}
