package integration_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// handOverPolls bounds TestHandOverPassesSilence's waits (100 ms apart).
const handOverPolls = 400

// TestHandOverPassesSilence: a planned hand-over of a cell's leadership
// (the admin transfer, as leader balancing makes it, and a clean stop's
// hand-off) passes each session's silence to the next leader, which does
// not give a silent session a fresh lease. Session frozen goes silent at
// its open, session fresh 5 s later, then the leadership moves: frozen's
// node goes about a lease after its open, fresh's about 5 s after that,
// and a session renewing all along keeps its node. Before the hand-over's
// record (or with it skipped: mutant lockd_broken_handover_skipped) the
// new leader gave both a full lease from its start and both went within
// milliseconds of each other, a hand-over plus a lease after frozen fell
// silent.
func TestHandOverPassesSilence(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"transfer", "stop"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			handOverPassesSilence(t, how)
		})
	}
}

func handOverPassesSilence(t *testing.T, how string) {
	const lease = 8 * time.Second
	c := cluster.Start(t, cluster.Options{Lease: lease})
	cl := c.NewClient()
	live := openSession(t, cl, "demo", lease)
	live.keepAlive(time.Second)
	defer live.stop()
	mustDo(t, cl, api.RoutePut, api.PutRequest{WriteHeader: live.header(), Path: "/demo/ho/live", MakeParents: true}, nil)
	mine := func(s *session, name string) string {
		p := "/demo/ho/" + name
		mustDo(t, cl, api.RouteCreate, api.CreateRequest{WriteHeader: s.header(), Path: p, Ephemeral: true}, nil)
		return p
	}
	frozen := mine(openSession(t, cl, "demo", lease), "frozen")
	time.Sleep(5 * time.Second)
	fresh := mine(openSession(t, cl, "demo", lease), "fresh")
	livePath := mine(live, "live-eph")

	from := leaderByStatus(t, c, "demo")
	switch how {
	case "transfer":
		to := from%5 + 1
		ctx, cancel := ctxFor(callTimeout)
		code, out, err := cl.Once(ctx, c.Endpoints()[from-1], "POST", api.RouteAdminTransfer, []byte(fmt.Sprintf(`{"cell":"demo","to":%d}`, to)), callTimeout)
		cancel()
		if err != nil || code != 200 {
			t.Fatalf("hand demo's leadership from lockd %d to %d: %d %s %v", from, to, code, out, err)
		}
	case "stop":
		must(t, c.Stop(from)) // SIGTERM: the lockd hands its leaderships off
	}
	if now := leaderByStatus(t, c, "demo"); now == from {
		t.Fatalf("lockd %d still leads demo after the hand-over (%s)", from, how)
	}
	exists := func(p string) bool {
		err := do(cl, api.RouteGet, api.ReadRequest{Path: p}, nil)
		if err != nil && api.CodeOf(err) != api.CodeNoNode {
			t.Fatalf("get %s: %v", p, err)
		}
		return err == nil
	}
	for i := 0; exists(frozen); i++ {
		if i == handOverPolls {
			t.Fatalf("%s still there %s after the hand-over", frozen, handOverPolls*100*time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// fresh fell silent 5 s after frozen: with the silences passed on it
	// outlives frozen by about that; with a full lease each, by nothing.
	time.Sleep(1500 * time.Millisecond)
	if !exists(fresh) {
		t.Fatalf("%s went with %s: the new leader gave both a full lease from its start, not what they had left", fresh, frozen)
	}
	for i := 0; exists(fresh); i++ {
		if i == handOverPolls {
			t.Fatalf("%s still there %s after %s went", fresh, handOverPolls*100*time.Millisecond, frozen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := live.deadErr(); err != nil || !exists(livePath) {
		t.Fatalf("the renewing session did not survive the hand-over: %v, its node there: %v", err, exists(livePath))
	}
}
