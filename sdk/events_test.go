package sdk

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// scriptedEvent and scriptedReply are KeepAlive replies a test writes by
// hand (the wire form of api.Event and api.SessionResponse).
type scriptedEvent struct {
	Type  api.EventType `json:"type"`
	Path  string        `json:"path"`
	Kind  api.WatchKind `json:"kind"`
	Index uint64        `json:"index"`
	Seq   uint64        `json:"seq"`
}

type scriptedReply struct {
	Session uint64          `json:"session"`
	LeaseMS int64           `json:"lease_ms"`
	Epoch   uint64          `json:"epoch"`
	Index   uint64          `json:"index"`
	Events  []scriptedEvent `json:"events"`
}

// scriptKeepAlives answers the session's KeepAlives with the replies sent
// on the returned channel, one each, and otherwise lets them through with
// a short long-poll so that the next scripted reply is picked up soon.
func scriptKeepAlives(t *testing.T, fc *fakeCell, s *Session) chan<- []scriptedEvent {
	script := make(chan []scriptedEvent, 4)
	epoch := s.Epoch()
	fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
		if route != api.RouteSessionKeepAlive {
			return next()
		}
		var req api.KeepAliveRequest
		_ = json.Unmarshal(body, &req)
		if req.Session != s.ID() {
			return next()
		}
		select {
		case evs := <-script:
			return 200, scriptedReply{Session: s.ID(), LeaseMS: s.Lease().Milliseconds(), Epoch: epoch, Events: evs}
		default:
		}
		req.WaitMS = min(req.WaitMS, 20)
		return fc.handle(rep, route, mustJSON(t, req))
	})
	return script
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A KeepAlive reply carrying an event the session already processed (the
// cell re-sends events until they are acknowledged) must not fire it again.
func TestDuplicateEventProcessedOnce(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, nil)
		ctx := testCtx(t)
		_, _, ch1, err := c.GetW(ctx, "/demo/d1")
		if err != nil {
			t.Fatal(err)
		}
		s := sessionOf(t, c)
		script := scriptKeepAlives(t, fc, s)
		script <- []scriptedEvent{{Type: api.EventResync, Seq: 5}}
		if ev := recvEvent(t, ch1); ev.Type != api.EventResync {
			t.Fatalf("first delivery: %+v", ev)
		}
		// Re-arm after the resync, as a watcher does.
		_, _, ch2, err := c.GetW(ctx, "/demo/d1")
		if err != nil {
			t.Fatal(err)
		}
		_, _, ch3, err := c.GetW(ctx, "/demo/d2")
		if err != nil {
			t.Fatal(err)
		}
		// The same resync again (its ack was lost), then a new event.
		script <- []scriptedEvent{{Type: api.EventResync, Seq: 5}, {Type: api.EventDeleted, Path: "/demo/d2", Kind: api.WatchData, Index: 1 << 40, Seq: 6}}
		if ev := recvEvent(t, ch3); ev.Type != api.EventDeleted {
			t.Fatalf("new event: %+v, want deleted (the duplicate resync was processed again)", ev)
		}
		select {
		case ev := <-ch2:
			t.Fatalf("re-armed watch fired by a duplicate event: %+v", ev)
		default:
		}
		// The next KeepAlive acknowledges what was processed.
		waitFor(t, "ack of seq 6", func() bool {
			for _, r := range fc.requests(api.RouteSessionKeepAlive) {
				req := decode[api.KeepAliveRequest](t, r.body)
				if req.Session == s.ID() && req.AckEpoch == s.Epoch() && req.AckSeq == 6 {
					return true
				}
			}
			return false
		})
	})
}

// A waiter that never hears of its predecessor's deletion (the event was
// lost) re-lists after a lease of silence and is granted.
func TestWaiterRelistsAfterLeaseOfSilence(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		ctx := testCtx(t)
		ca, cb := newTestClient(t, fc, nil), newTestClient(t, fc, shortLease)
		a, b := ca.NewMutex(lockDir), cb.NewMutex(lockDir)
		if err := a.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		bDone := lockAsync(ctx, b)
		names := waitNodes(t, fc, lockDir, 2)
		sb := sessionOf(t, cb)
		want := watchKey{api.Join(lockDir, names[0]), api.WatchData}
		waitFor(t, "B's predecessor watch", func() bool { return fc.armed(sb.ID(), want) })
		// A lease of silence with the predecessor still there: a re-list
		// that finds nothing gone is not an unheard release.
		first := lockStateReads(t, fc, api.Join(lockDir, names[1]))
		waitFor(t, "a re-list after a lease of silence", func() bool {
			return lockStateReads(t, fc, api.Join(lockDir, names[1])) > first
		})
		if got := b.Unheard(); got != 0 {
			t.Fatalf("Unheard %d after a silent re-list that found its predecessor, want 0", got)
		}
		reads := lockStateReads(t, fc, api.Join(lockDir, names[1]))

		fc.DeleteQuietly(api.Join(lockDir, names[0])) // no session hears of it
		if err := recvErr(t, bDone); err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if !b.Held() {
			t.Fatal("waiter not granted")
		}
		if n := lockStateReads(t, fc, api.Join(lockDir, names[1])); n <= reads {
			t.Fatal("granted without a re-list")
		}
		if w, u := b.Wakeups(), b.Unheard(); w != 0 || u != 1 {
			t.Fatalf("Wakeups %d, Unheard %d after a release it never heard of: want 0 and 1", w, u)
		}
	})
}

// TestLeaseAgeFromAProxy: a proxy answers KeepAlives from its last
// confirmed batch and says how old that renewal is (lease_age_ms). A
// client whose proxy keeps answering with a renewal as old as the lease
// must fall into jeopardy: its lease clock counts from its send time less
// that age, never from the send alone.
func TestLeaseAgeFromAProxy(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 1)
		c := newTestClient(t, fc, func(cfg *Config) { cfg.Lease = time.Second })
		s, err := c.Session(testCtx(t), "demo-cell")
		if err != nil {
			t.Fatal(err)
		}
		fc.setHook(func(rep int, route string, body []byte, next func() (int, any)) (int, any) {
			if route != api.RouteSessionKeepAlive {
				return next()
			}
			time.Sleep(20 * time.Millisecond)
			return 200, api.SessionResponse{Session: s.ID(), LeaseMS: 1000, Epoch: s.Epoch(), LeaseAgeMS: 1000}
		})
		deadline := time.After(testWait)
		for {
			select {
			case ev := <-s.Events():
				if ev.Type == SessionJeopardy {
					return
				}
			case <-deadline:
				t.Fatal("no jeopardy although every confirmation was a lease old")
			}
		}
	})
}
