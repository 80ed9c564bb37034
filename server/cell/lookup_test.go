package cell

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/lni/dragonboat/v4"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
	"github.com/lockservice/lockd/server/watch"
)

// recordingSink collects the events the watch table delivers.
type recordingSink struct {
	mu  sync.Mutex
	evs map[uint64][]api.Event
}

func (r *recordingSink) Deliver(id uint64, ev api.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.evs == nil {
		r.evs = map[uint64][]api.Event{}
	}
	r.evs[id] = append(r.evs[id], ev)
}

func (r *recordingSink) events(id uint64) []api.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]api.Event(nil), r.evs[id]...)
}

// leadingReplica is a replica that leads (its session manager runs) and
// serves /demo, with its watch table delivering to a recorder.
func leadingReplica(t *testing.T) (*testReplica, *recordingSink) {
	t.Helper()
	r := newTestReplica(t, 1, nil)
	r.c.leaderID.Store(1)
	r.c.term.Store(1)
	r.apply(fsm.Command{Op: fsm.OpLeaderStart, ReplicaID: 1, Term: 1})
	r.apply(fsm.Command{Op: fsm.OpEnsurePrefix, Path: "/demo", Epoch: 1})
	if active, _ := r.c.sessions.Active(); !active {
		t.Fatal("session manager did not start")
	}
	sink := &recordingSink{}
	r.c.watches = watch.NewTable(sink)
	return r, sink
}

func armed(c *Cell) int {
	n, _ := c.watches.Stats()
	return n
}

// A get with a children watch on a missing node answers no_node, like
// ZooKeeper's getChildren, and must then not leave the watch armed (the
// client was told there is nothing to watch and will not expect an event).
// A data watch on a missing node is an exists-watch: it answers
// exists=false and stays armed until the node is created.
func TestGetWatchOnMissingNode(t *testing.T) {
	r, _ := leadingReplica(t)
	id := r.apply(fsm.Command{Op: fsm.OpOpenSession}).Session

	_, err := r.c.lookupGet(r.m.state, getQuery{path: "/demo/missing", session: id, watch: api.WatchChildren})
	if !errors.Is(err, api.ErrNoNode) {
		t.Fatalf("get with children watch on a missing node: %v, want no_node", err)
	}
	if n := armed(r.c); n != 0 {
		t.Fatalf("get answered no_node but left %d watch(es) armed", n)
	}

	v, err := r.c.lookupGet(r.m.state, getQuery{path: "/demo/missing", session: id, watch: api.WatchData})
	if err != nil || v.Exists {
		t.Fatalf("get with data watch on a missing node: %+v, %v; want exists=false", v, err)
	}
	if n := armed(r.c); n != 1 {
		t.Fatalf("exists-watch on a missing node: %d armed, want 1", n)
	}
}

// A retried lock create is answered from the session's dedupe window with
// the first attempt's wait_for. If that predecessor was deleted in between,
// arming a watch on it would wait forever: the deleted event must fire at
// once instead.
func TestDedupedLockCreateFiresForGonePredecessor(t *testing.T) {
	r, sink := leadingReplica(t)
	holder := r.apply(fsm.Command{Op: fsm.OpOpenSession}).Session
	waiter := r.apply(fsm.Command{Op: fsm.OpOpenSession}).Session
	lock := func(sess, req uint64) fsm.Command {
		return fsm.Command{Op: fsm.OpCreate, Path: "/demo/l/w-", Ephemeral: true, Sequential: true, Lock: api.LockExclusive,
			MakeParents: true, WriteHeader: api.WriteHeader{Session: sess, Request: req}}
	}
	held := r.apply(lock(holder, 1))
	first := r.apply(lock(waiter, 1))
	if first.WaitFor != held.Node.Path {
		t.Fatalf("waiter waits for %q, want %q", first.WaitFor, held.Node.Path)
	}
	// The first attempt's reply is lost; the holder releases; the watch the
	// first apply armed fires, but to a client that never learnt of it.
	r.apply(fsm.Command{Op: fsm.OpDelete, Path: held.Node.Path, WriteHeader: api.WriteHeader{Session: holder, Request: 2}})
	before := len(sink.events(waiter))

	again := r.apply(lock(waiter, 1))
	if again.WaitFor != first.WaitFor || again.Node.Path != first.Node.Path {
		t.Fatalf("retry answered %+v, want the first answer %+v", again, first)
	}
	evs := sink.events(waiter)[before:]
	if len(evs) != 1 || evs[0].Type != api.EventDeleted || evs[0].Path != first.WaitFor || evs[0].Kind != api.WatchData {
		t.Fatalf("after the retry the waiter got %+v, want one deleted event for %s", evs, first.WaitFor)
	}
	if n := armed(r.c); n != 0 {
		t.Fatalf("%d watch(es) left armed on a node that is gone", n)
	}

	// A retry while the predecessor still exists re-arms its watch as usual.
	third := r.apply(lock(holder, 3))
	if third.WaitFor != first.Node.Path {
		t.Fatalf("third waits for %q, want %q", third.WaitFor, first.Node.Path)
	}
	r.apply(lock(holder, 3))
	if n := armed(r.c); n != 1 {
		t.Fatalf("retry with a live predecessor: %d armed, want 1", n)
	}
}

// raftError sorts dragonboat's errors into retryable (unavailable: the
// outcome is unknown, the client retries with the same request id) and
// permanent ones, which the SDK must not retry forever. Only errors that
// say the entry entered no log are marked not applied (a write without a
// request id is resent): a timed-out or cancelled proposal may still
// commit. Mutant lockd_broken_timeout_notapplied (a timeout marked not
// applied) fails it.
func TestRaftErrorCodes(t *testing.T) {
	wrappedBusy := fmt.Errorf("wrapped: %w", dragonboat.ErrSystemBusy)
	notApplied := map[error]bool{wrappedBusy: true, dragonboat.ErrSystemBusy: true, dragonboat.ErrShardNotReady: true, dragonboat.ErrShardNotInitialized: true,
		dragonboat.ErrInvalidDeadline: true, dragonboat.ErrTimeoutTooSmall: true}
	cases := []struct {
		err  error
		want api.Code
	}{
		{dragonboat.ErrTimeout, api.CodeUnavailable},
		{dragonboat.ErrSystemBusy, api.CodeUnavailable},
		{dragonboat.ErrShardNotReady, api.CodeUnavailable},
		{dragonboat.ErrShardNotInitialized, api.CodeUnavailable},
		{dragonboat.ErrShardClosed, api.CodeUnavailable},
		{dragonboat.ErrClosed, api.CodeUnavailable},
		{dragonboat.ErrCanceled, api.CodeUnavailable},
		{dragonboat.ErrAborted, api.CodeUnavailable},
		{dragonboat.ErrInvalidDeadline, api.CodeUnavailable},
		{dragonboat.ErrTimeoutTooSmall, api.CodeUnavailable},
		{dragonboat.ErrLogDBNotCreatedOrClosed, api.CodeUnavailable},
		{context.DeadlineExceeded, api.CodeUnavailable},
		{context.Canceled, api.CodeUnavailable},
		{wrappedBusy, api.CodeUnavailable},
		{dragonboat.ErrReplicaRemoved, api.CodeNotLeader},
		{dragonboat.ErrShardNotFound, api.CodeWrongCell},
		{dragonboat.ErrPayloadTooBig, api.CodeValueTooLarge},
		{dragonboat.ErrRejected, api.CodeInternal},
		{dragonboat.ErrDeadlineNotSet, api.CodeInternal},
		{dragonboat.ErrInvalidSession, api.CodeInternal},
		{dragonboat.ErrInvalidOperation, api.CodeInternal},
		{errors.New("something dragonboat never documented"), api.CodeInternal},
	}
	for _, tc := range cases {
		got := raftError(tc.err)
		if api.CodeOf(got) != tc.want {
			t.Errorf("raftError(%v) = %q, want %q", tc.err, api.CodeOf(got), tc.want)
		}
		if na := api.AsError(got).NotApplied; na != notApplied[tc.err] {
			t.Errorf("raftError(%v): not_applied %v, want %v", tc.err, na, notApplied[tc.err])
		}
	}
}

// TestWatchesPerSessionLimit: a watch-arming read past
// MaxWatchesPerSession is refused with limit_exceeded and arms nothing; a
// re-arm is refused whole; a lock's own wait is never refused.
func TestWatchesPerSessionLimit(t *testing.T) {
	r, _ := leadingReplica(t)
	id := r.apply(fsm.Command{Op: fsm.OpOpenSession}).Session
	for i := 0; i < api.MaxWatchesPerSession-1; i++ {
		r.c.watches.Register(id, "", fmt.Sprintf("/demo/w%d", i), api.WatchData)
	}
	if _, err := r.c.lookupGet(r.m.state, getQuery{path: "/demo/last", session: id, watch: api.WatchData}); err != nil {
		t.Fatalf("the last watch within the limit: %v", err)
	}
	_, err := r.c.lookupGet(r.m.state, getQuery{path: "/demo/over", session: id, watch: api.WatchData})
	if api.CodeOf(err) != api.CodeLimitExceeded {
		t.Fatalf("a watch past the limit: %v, want limit_exceeded", err)
	}
	specs := []api.WatchSpec{{Path: "/demo/a", Kind: api.WatchData}, {Path: "/demo/b", Kind: api.WatchData}}
	if _, err := r.c.lookupWatch(r.m.state, watchQuery{session: id, specs: specs}); api.CodeOf(err) != api.CodeLimitExceeded {
		t.Fatalf("a re-arm past the limit: %v, want limit_exceeded", err)
	}
	if n := r.c.watches.Armed(id); n != api.MaxWatchesPerSession {
		t.Fatalf("%d watches armed after the refusals, want %d", n, api.MaxWatchesPerSession)
	}
	r.apply(fsm.Command{Op: fsm.OpCreate, Path: "/demo/lk"})
	r.apply(fsm.Command{Op: fsm.OpCreate, Path: "/demo/lk/w-", Ephemeral: true, Sequential: true, Lock: api.LockExclusive, WriteHeader: api.WriteHeader{Session: id}})
	if _, err := r.c.lookupLockState(r.m.state, lockStateQuery{path: "/demo/lk/w-0000000000", session: id, watch: true}); err != nil {
		t.Fatalf("a lock's own wait past the limit: %v", err)
	}
}
