package integration_test

import (
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestLockDelaySurvivesDirectoryDelete (issue 23, finding 8), through the
// HTTP API on real processes: a holder with a lock-delay closes its
// session while holding (an unclean release: the lock goes into its
// delay); the now empty lock directory is deleted; a Lock in the
// directory made again must wait out the delay (not be granted at once),
// get a lock node whose sequence did not restart and a fencing token
// above the first holder's, and be granted after the delay's end.
//
// A build with mutant lockd_broken_dirdelay (deleting the directory drops
// its delay) fails it.
func TestLockDelaySurvivesDirectoryDelete(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits out a lock-delay")
	}
	const (
		delay = 6 * time.Second
		dir   = "/demo/dirdelay/job"
	)
	c := cluster.Start(t, cluster.Options{})
	cl := c.NewClient()
	lockReq := func(s *session) api.CreateRequest {
		return api.CreateRequest{WriteHeader: s.header(), Path: dir + "/w-", Ephemeral: true, Sequential: true,
			Lock: api.LockExclusive, MakeParents: true, LockDelayMS: delay.Milliseconds()}
	}

	a := openSession(t, cl, "demo", 5*time.Second)
	var first api.CreateResponse
	mustDo(t, cl, api.RouteCreate, lockReq(a), &first)
	if first.WaitFor != "" {
		t.Fatalf("first lock waits for %q", first.WaitFor)
	}
	must(t, a.close()) // closing the session while holding: an unclean release
	var q api.LockQueueResponse
	mustDo(t, cl, api.RouteLockQueue, api.LockQueueRequest{Path: dir}, &q)
	if q.Delay == nil {
		t.Fatalf("queue after the holder's close: %+v, want a lock-delay", q)
	}
	until := time.UnixMilli(q.Delay.UntilMS)
	mustDo(t, cl, api.RouteDelete, api.DeleteRequest{Path: dir}, nil)
	deleted := time.Now()
	t.Logf("lock-delay %v from the release at index %d; directory deleted %v before its end",
		time.Duration(q.Delay.MS)*time.Millisecond, q.Delay.Since, until.Sub(deleted).Round(time.Millisecond))

	b := openSession(t, cl, "demo", 5*time.Second)
	b.keepAlive(time.Second)
	defer b.stop()
	var second api.CreateResponse
	mustDo(t, cl, api.RouteCreate, lockReq(b), &second)
	t.Logf("Lock in the directory made again, %v after its delete: node %s, token %d (first %s, token %d), waits for %q",
		time.Since(deleted).Round(time.Millisecond), second.Node.Path, second.Token, first.Node.Path, first.Token, second.WaitFor)
	if second.WaitFor == "" && time.Now().Before(until) {
		t.Fatalf("granted %v into a %v lock-delay: deleting the empty lock directory ended it",
			time.Duration(q.Delay.MS)*time.Millisecond-time.Until(until), delay)
	}
	if second.Node.Path <= first.Node.Path {
		t.Fatalf("lock node %s after %s: the sequence restarted with the directory", second.Node.Path, first.Node.Path)
	}
	if second.Token <= first.Token {
		t.Fatalf("token %d after %d: fencing tokens must rise", second.Token, first.Token)
	}
	var ls api.LockStateResponse
	for i := 0; i < 1000 && !ls.Held; i++ {
		mustDo(t, cl, api.RouteLockState, api.LockStateRequest{Path: second.Node.Path, Session: b.id, Secret: b.secret}, &ls)
		if !ls.Held {
			time.Sleep(50 * time.Millisecond)
		}
	}
	granted := time.Now()
	if !ls.Held {
		t.Fatalf("not granted %v after the delay's end", granted.Sub(until))
	}
	t.Logf("granted %v after the delay's end", granted.Sub(until).Round(time.Millisecond))
	if granted.Before(until) {
		t.Fatalf("granted %v before the lock-delay's end", until.Sub(granted))
	}
}

// TestKeptDelayOutlivesEphemeralNode (issue 23, attack review 3): the
// lock-delay kept for a deleted lock directory, and its sequence counter,
// survive an ephemeral node made at the directory's path whose session
// then ends: a Lock in the directory made again waits, and its node's
// sequence goes on. A build with mutant lockd_broken_ephdelay fails it.
func TestKeptDelayOutlivesEphemeralNode(t *testing.T) {
	t.Parallel()
	const (
		delay = 30 * time.Second
		dir   = "/demo/kd/job"
	)
	c := cluster.Start(t, cluster.Options{})
	cl := c.NewClient()
	lockReq := func(s *session) api.CreateRequest {
		return api.CreateRequest{WriteHeader: s.header(), Path: dir + "/w-", Ephemeral: true, Sequential: true,
			Lock: api.LockExclusive, MakeParents: true, LockDelayMS: delay.Milliseconds()}
	}
	a := openSession(t, cl, "demo", 5*time.Second)
	var first api.CreateResponse
	mustDo(t, cl, api.RouteCreate, lockReq(a), &first)
	must(t, a.close()) // an unclean release: the delay starts
	released := time.Now()
	mustDo(t, cl, api.RouteDelete, api.DeleteRequest{Path: dir}, nil)

	e := openSession(t, cl, "demo", 5*time.Second)
	mustDo(t, cl, api.RouteCreate, api.CreateRequest{WriteHeader: e.header(), Path: dir, Ephemeral: true}, nil)
	must(t, e.close()) // its session ends: the node goes

	b := openSession(t, cl, "demo", 5*time.Second)
	b.keepAlive(time.Second)
	defer b.stop()
	var second api.CreateResponse
	mustDo(t, cl, api.RouteCreate, lockReq(b), &second)
	if second.WaitFor == "" {
		t.Fatalf("%s granted at once %v into a %v lock-delay (node %s after %s)",
			dir, time.Since(released).Round(time.Millisecond), delay, second.Node.Path, first.Node.Path)
	}
	if second.Node.Path <= first.Node.Path {
		t.Fatalf("lock node %s after %s: the sequence restarted", second.Node.Path, first.Node.Path)
	}
	t.Logf("the new lock %s waits for %s, %v into the delay", second.Node.Path, second.WaitFor, time.Since(released).Round(time.Millisecond))
}
