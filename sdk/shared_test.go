package sdk

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestGateHoldsAcknowledgements: an invalidation the gate holds is not
// acknowledged, nor anything after it (acknowledgements are cumulative),
// until the gate releases it; a new epoch held back is acknowledged as
// epoch 0, which no leader takes; a new leadership drops the old holds.
func TestGateHoldsAcknowledgements(t *testing.T) {
	var ws watchSet
	ws.init()
	_, inv, first, _ := ws.dispatch(5, []api.Event{
		{Type: api.EventDataChanged, Path: "/a", Seq: 1},
		{Type: api.EventInvalidate, Path: "/b", Seq: 2},
		{Type: api.EventInvalidate, Path: "/c", Seq: 3},
		{Type: api.EventDataChanged, Path: "/d", Seq: 4},
	})
	if len(inv) != 2 || first != 2 {
		t.Fatalf("invalidated %v, first seq %d; want /b and /c from seq 2", inv, first)
	}
	release := make(chan struct{})
	ws.hold(first, release)
	if e, s := ws.ack(); e != 5 || s != 1 || !ws.held() {
		t.Fatalf("ack (%d,%d) while the gate holds seq 2: want (5,1)", e, s)
	}
	close(release)
	if e, s := ws.ack(); e != 5 || s != 4 || ws.held() {
		t.Fatalf("ack (%d,%d) after the release: want (5,4)", e, s)
	}

	epochHold := make(chan struct{})
	ws.dispatch(6, []api.Event{{Type: api.EventInvalidate, Path: "/e", Seq: 1}})
	ws.hold(1, make(chan struct{})) // never released: the fail-over below drops it
	ws.epochHold = epochHold
	if e, s := ws.ack(); e != 0 || s != 0 {
		t.Fatalf("ack (%d,%d) while the epoch is held: want (0,0)", e, s)
	}
	ws.dispatch(7, nil)
	close(epochHold)
	if e, s := ws.ack(); e != 7 || s != 0 || ws.held() {
		t.Fatalf("ack (%d,%d) under a new leader: want (7,0) with nothing held", e, s)
	}
}

// TestResyncHeldLikeAnInvalidation: a resync may stand for dropped
// invalidations, so the gate is asked about it too.
func TestResyncHeldLikeAnInvalidation(t *testing.T) {
	var ws watchSet
	ws.init()
	_, _, first, resync := ws.dispatch(3, []api.Event{{Type: api.EventResync, Seq: 9}})
	if !resync || first != 9 {
		t.Fatalf("resync %v first %d: want a resync held from seq 9", resync, first)
	}
}

// TestProxyEventsNumberedApart: a proxy's events are deduplicated by the
// proxy's own numbering, apart from the leader's, and fire the watches
// they match.
func TestProxyEventsNumberedApart(t *testing.T) {
	var ws watchSet
	ws.init()
	ws.dispatch(2, []api.Event{{Type: api.EventDataChanged, Path: "/x", Seq: 40}})
	ws.beginRead()
	ch, _ := ws.finishRead(watchKey{"/p", api.WatchData}, 10, true, false)
	ev := api.Event{Type: api.EventDataChanged, Path: "/p", Kind: api.WatchData, Index: 11, Seq: 1}
	_, _, resync := ws.dispatchProxy([]api.Event{ev, {Type: api.EventInvalidate, Path: "/q", Seq: 2}})
	if resync {
		t.Fatal("no resync was sent")
	}
	if got := <-ch; got.Index != 11 {
		t.Fatalf("the watch got %+v", got)
	}
	if _, inv, _ := ws.dispatchProxy([]api.Event{{Type: api.EventInvalidate, Path: "/q", Seq: 2}}); len(inv) != 0 {
		t.Fatalf("a proxy event processed twice: %v", inv)
	}
	if ws.pseq != 2 || ws.seq != 40 {
		t.Fatalf("seqs: proxy %d leader %d; want 2 and 40", ws.pseq, ws.seq)
	}
}
