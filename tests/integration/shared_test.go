package integration_test

import (
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestSharedCluster runs the checks that kill nothing on one five-replica
// cluster (rtt 20 ms, default lease 3 s), one after another. Each subtest
// leaves no session and no ephemeral node behind.
func TestSharedCluster(t *testing.T) {
	// Not parallel: it asserts that waiters wake by their watch event well
	// within 5 s and sessions end within their lease, which other clusters'
	// load on the machine would blur.
	c := cluster.Start(t, cluster.Options{})
	cl := c.NewClient()
	defer cl.Close()

	t.Run("MutualExclusion", func(t *testing.T) { testMutualExclusion(t, cl) })
	t.Run("LeaseExpiry", func(t *testing.T) { testLeaseExpiry(t, cl) })
	t.Run("BadInputChangesNothing", func(t *testing.T) { testBadInput(t, c, cl) })
	t.Run("NotLeaderHintAndStatus", func(t *testing.T) { testNotLeaderHint(t, c) })
}

// testMutualExclusion: 20 sessions take the same exclusive lock 5 times
// each with the waiting recipe. No two holders ever overlap, judged three
// ways: by server indices (each grant is observed at or after the previous
// holder's delete), by the holders' own clock, and by an unguarded
// read-modify-write counter that loses increments under any overlap.
// Tokens strictly increase in grant order.
func testMutualExclusion(t *testing.T, cl *cluster.Client) {
	const (
		sessions = 20
		rounds   = 5
		dir      = "/demo/locks/L"
		counter  = "/demo/locks/L-counter"
	)
	mustDo(t, cl, api.RoutePut, api.PutRequest{Path: counter, Value: []byte("0"), MakeParents: true}, nil)

	var (
		mu       sync.Mutex
		grants   []lockGrant
		holders  atomic.Int32
		overlaps atomic.Int32
		wg       sync.WaitGroup
	)
	start := time.Now()
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s, err := tryOpenSession(cl, "demo", 3*time.Second)
			if err != nil {
				t.Errorf("session %d: %v", i, err)
				return
			}
			s.keepAlive(time.Second)
			defer func() {
				if err := s.close(); err != nil {
					t.Errorf("close session %d: %v", s.id, err)
				}
			}()
			for r := 0; r < rounds; r++ {
				g, err := s.acquire(dir)
				if err != nil {
					t.Errorf("session %d round %d: %v", s.id, r, err)
					return
				}
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				// The critical section: an increment that is only correct
				// under mutual exclusion (no version check).
				var gr api.GetResponse
				if err := do(cl, api.RouteGet, api.ReadRequest{Path: counter}, &gr); err != nil {
					t.Errorf("get counter: %v", err)
					return
				}
				n, _ := strconv.Atoi(string(gr.Node.Value))
				if err := do(cl, api.RoutePut, api.PutRequest{Path: counter, Value: []byte(strconv.Itoa(n + 1))}, nil); err != nil {
					t.Errorf("put counter: %v", err)
					return
				}
				time.Sleep(2 * time.Millisecond)
				holders.Add(-1)
				if err := s.release(&g); err != nil {
					t.Errorf("session %d: %v", s.id, err)
					return
				}
				mu.Lock()
				grants = append(grants, g)
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if t.Failed() {
		return
	}
	if len(grants) != sessions*rounds {
		t.Fatalf("%d grants, want %d", len(grants), sessions*rounds)
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d grants found another holder inside the critical section", n)
	}
	var gr api.GetResponse
	mustDo(t, cl, api.RouteGet, api.ReadRequest{Path: counter}, &gr)
	if got := string(gr.Node.Value); got != strconv.Itoa(sessions*rounds) {
		t.Errorf("unguarded counter is %s after %d critical sections: increments were lost to overlap", got, sessions*rounds)
	}

	sort.Slice(grants, func(i, j int) bool { return grants[i].grantIdx < grants[j].grantIdx })
	waits, fallbacks := 0, 0
	for i, g := range grants {
		waits += g.waits
		fallbacks += g.fallbacks
		if api.TokenEpoch(g.token) != 1 || api.TokenIndex(g.token) != g.createIdx {
			t.Errorf("grant %s: token %d is not MakeToken(1, create index %d)", g.path, g.token, g.createIdx)
		}
		if g.releaseIdx <= g.grantIdx {
			t.Errorf("grant %s: released at index %d, not after its grant at %d", g.path, g.releaseIdx, g.grantIdx)
		}
		if i == 0 {
			continue
		}
		p := grants[i-1]
		// The grant was read from a state at index grantIdx; if the
		// previous holder's delete came later than that, both held at once.
		// (The create index cannot be compared: a waiter's node predates
		// the release it waits for.)
		if g.grantIdx < p.releaseIdx {
			t.Errorf("overlap by index: %s (session %d) granted at %d before %s (session %d) was deleted at %d",
				g.path, g.session, g.grantIdx, p.path, p.session, p.releaseIdx)
		}
		if g.token <= p.token {
			t.Errorf("token order: %s got %d after %s had %d", g.path, g.token, p.path, p.token)
		}
		if g.granted.Before(p.released) {
			t.Errorf("overlap by the holders' clock: %s granted %v before %s released",
				g.path, p.released.Sub(g.granted), p.path)
		}
	}
	t.Logf("%d grants by %d sessions in %v (%.1f ms per hand-off); %d wake-ups, %d by timeout instead of event",
		len(grants), sessions, elapsed, float64(elapsed.Milliseconds())/float64(len(grants)), waits, fallbacks)
	if fallbacks > 0 {
		t.Errorf("%d wake-ups came by the %v timeout, not by the predecessor's watch event", fallbacks, eventWait)
	}
	var ch api.ChildrenResponse
	mustDo(t, cl, api.RouteChildren, api.ReadRequest{Path: dir}, &ch)
	if len(ch.Children) != 0 {
		t.Errorf("lock nodes left behind: %v", ch.Children)
	}
}

// testLeaseExpiry: a session that stops keepaliving (lease 2 s) loses its
// ephemeral nodes and its lock, which passes to a waiter; using it then
// fails with session_expired. A keepalived session's nodes survive.
func testLeaseExpiry(t *testing.T, cl *cluster.Client) {
	const lease = 2 * time.Second
	dead := openSession(t, cl, "demo", lease) // never keepalived
	opened := time.Now()
	live := openSession(t, cl, "demo", lease)
	live.keepAlive(lease / 3)
	defer func() {
		if err := live.close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	if dead.lease != lease || live.lease != lease {
		t.Fatalf("leases %v, %v; asked for %v", dead.lease, live.lease, lease)
	}

	var deadNodes, liveNodes []string
	for i := 0; i < 2; i++ {
		var cr api.CreateResponse
		mustDo(t, cl, api.RouteCreate, api.CreateRequest{WriteHeader: dead.header(), Path: fmt.Sprintf("/demo/lease/dead-%d", i), Ephemeral: true, MakeParents: true}, &cr)
		deadNodes = append(deadNodes, cr.Node.Path)
		mustDo(t, cl, api.RouteCreate, api.CreateRequest{WriteHeader: live.header(), Path: fmt.Sprintf("/demo/lease/live-%d", i), Ephemeral: true, MakeParents: true}, &cr)
		liveNodes = append(liveNodes, cr.Node.Path)
	}
	deadLock, err := dead.acquire("/demo/lease/lock")
	must(t, err)
	if deadLock.waits != 0 {
		t.Fatalf("uncontended lock waited")
	}
	var waiter api.CreateResponse
	mustDo(t, cl, api.RouteCreate, api.CreateRequest{WriteHeader: live.header(), Path: "/demo/lease/lock/n-",
		Ephemeral: true, Sequential: true, Lock: api.LockExclusive}, &waiter)
	if waiter.WaitFor != deadLock.path {
		t.Fatalf("waiter waits for %q, want %q", waiter.WaitFor, deadLock.path)
	}
	deadNodes = append(deadNodes, deadLock.path)

	// Wait (bounded) for the expiry to delete the dead session's nodes.
	var gone time.Duration
	for i := 0; ; i++ {
		if i > 10_000 {
			t.Fatalf("%s still exists after 10000 polls", deadNodes[0])
		}
		err := do(cl, api.RouteGet, api.ReadRequest{Path: deadNodes[0]}, nil)
		if isCode(err, api.CodeNoNode) {
			gone = time.Since(opened)
			break
		}
		if err != nil {
			t.Fatalf("get %s: %v", deadNodes[0], err)
		}
		if time.Since(opened) > lease+20*time.Second {
			t.Fatalf("%s still exists %v after its session opened with a %v lease", deadNodes[0], time.Since(opened), lease)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("dead session %d's nodes gone %v after open (lease %v)", dead.id, gone, lease)
	for _, p := range deadNodes {
		if err := do(cl, api.RouteGet, api.ReadRequest{Path: p}, nil); !isCode(err, api.CodeNoNode) {
			t.Errorf("get %s of the expired session: %v, want no_node", p, err)
		}
	}

	// The lock passed to the waiter, which heard of it by event.
	if _, ok := live.waitEvent(deadLock.path, 10*time.Second); !ok {
		t.Errorf("no event for the expired holder's lock node %s", deadLock.path)
	}
	var ls api.LockStateResponse
	mustDo(t, cl, api.RouteLockState, api.LockStateRequest{Path: waiter.Node.Path, Session: live.id, Secret: live.secret}, &ls)
	if !ls.Held || ls.Token <= deadLock.token {
		t.Errorf("waiter after the holder expired: %+v (expired holder's token %d)", ls, deadLock.token)
	}

	// The expired session fails on every use.
	uses := []struct {
		name  string
		route string
		req   any
	}{
		{"keepalive", api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: dead.id}},
		{"ephemeral create", api.RouteCreate, api.CreateRequest{WriteHeader: dead.header(), Path: "/demo/lease/again", Ephemeral: true}},
		{"session put", api.RoutePut, api.PutRequest{WriteHeader: dead.header(), Path: "/demo/lease/p", Value: []byte("x")}},
		{"watch", api.RouteWatch, api.WatchRequest{Cell: "demo", Session: dead.id}},
	}
	for _, u := range uses {
		if err := do(cl, u.route, u.req, nil); !isCode(err, api.CodeSessionExpired) {
			t.Errorf("%s on the expired session: %v, want session_expired", u.name, err)
		}
	}
	if err := do(cl, api.RouteGet, api.ReadRequest{Path: "/demo/lease/p"}, nil); !isCode(err, api.CodeNoNode) {
		t.Errorf("the refused put left /demo/lease/p: %v", err)
	}

	// The keepalived session lived through the same time, nodes intact.
	for _, p := range liveNodes {
		var g api.GetResponse
		if err := do(cl, api.RouteGet, api.ReadRequest{Path: p}, &g); err != nil || g.Node.Owner != live.id {
			t.Errorf("live session's %s: %v, owner %d (want %d)", p, err, g.Node.Owner, live.id)
		}
	}
	if err := live.deadErr(); err != nil {
		t.Errorf("keepalived session ended: %v", err)
	}
	var ka api.SessionResponse
	if err := do(cl, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: live.id, Secret: live.secret}, &ka); err != nil {
		t.Errorf("keepalive of the live session: %v", err)
	}
	t.Logf("live session %d: %d keepalives, %d retried", live.id, live.oks.Load(), live.transient.Load())

	// Closing the live session frees its nodes at once.
	must(t, live.close())
	for _, p := range append(liveNodes, waiter.Node.Path) {
		if err := do(cl, api.RouteGet, api.ReadRequest{Path: p}, nil); !isCode(err, api.CodeNoNode) {
			t.Errorf("after close, get %s: %v, want no_node", p, err)
		}
	}
}
