package proxy

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockservice/lockd/api"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func TestBuildBatchRenewsOnlyLiveClients(t *testing.T) {
	lease := 12 * time.Second
	sessions := map[uint64]*proxySession{
		1: {id: 1, lease: lease, lastKA: t0.Add(-2 * time.Second), base: t0.Add(-3 * time.Second)},
		2: {id: 2, lease: lease, lastKA: t0.Add(-13 * time.Second), base: t0.Add(-14 * time.Second)},                      // its client is gone
		3: {id: 3, lastKA: t0.Add(-100 * time.Millisecond)},                                                               // new here
		4: {id: 4, lease: lease, lastKA: t0, base: t0, ack: ack{5, 7}, sentAck: ack{5, 6}},                                // a new ack
		5: {id: 5, lease: lease, lastKA: t0, base: t0, err: api.Errorf(api.CodeSessionExpired, "gone")},                   // ended
		6: {id: 6, lease: lease, lastKA: t0, base: t0, events: []api.Event{{Seq: 9}}, ack: ack{5, 8}, sentAck: ack{5, 8}}, // holds events
	}
	req, items, _ := buildBatch("demo", "p1", 5, sessions, t0, fullBatch, time.Second, nil)
	if req.Cell != "demo" || req.Proxy != "p1" || req.Epoch != 5 || req.WaitMS != 1000 {
		t.Fatalf("request %+v", req)
	}
	ages := map[uint64]int64{}
	for i, id := range req.Sessions {
		ages[id] = req.AgeMS[i]
	}
	want := map[uint64]int64{1: 2000, 3: 100, 4: 0, 6: 0}
	if len(ages) != len(want) || len(items) != len(want) {
		t.Fatalf("renewed %v, want %v", ages, want)
	}
	for id, age := range want {
		if ages[id] != age {
			t.Errorf("session %d: age %d ms, want %d (the lease must run from its client's last KeepAlive)", id, ages[id], age)
		}
	}
	acks := map[uint64]api.BatchAck{}
	for _, a := range req.Acks {
		acks[a.Session] = a
	}
	if len(acks) != 3 || !acks[3].New || acks[4].AckSeq != 7 || acks[6].Seen != 9 || acks[6].AckSeq != 8 {
		t.Fatalf("acks %+v", req.Acks)
	}

	urgent, _, _ := buildBatch("demo", "p1", 5, map[uint64]*proxySession{
		1: {id: 1, lastKA: t0, urgent: true}, 2: {id: 2, lastKA: t0},
	}, t0, urgentBatch, 0, nil)
	if len(urgent.Sessions) != 1 || urgent.Sessions[0] != 1 {
		t.Fatalf("urgent batch %+v", urgent)
	}
	// Between full batches a poll carries only what there is to say: a
	// new acknowledgement (4), a session new here (3).
	poll, _, _ := buildBatch("demo", "p1", 5, sessions, t0, pollBatch, time.Second, nil)
	slices.Sort(poll.Sessions)
	if !slices.Equal(poll.Sessions, []uint64{3, 4}) {
		t.Fatalf("poll renews %v, want [3 4]", poll.Sessions)
	}
}

func TestApplyReply(t *testing.T) {
	lease := 12 * time.Second
	a := &proxySession{id: 1, lease: lease, lastKA: t0.Add(-time.Second), base: t0.Add(-2 * time.Second), ack: ack{3, 4}, events: []api.Event{{Seq: 4}, {Seq: 5}}}
	b := &proxySession{id: 2, lastKA: t0}
	c := &proxySession{id: 3, lease: lease, lastKA: t0, base: t0.Add(-time.Second)}
	all := map[uint64]*proxySession{1: a, 2: b, 3: c}
	items := []batchItem{{ps: a, lastKA: a.lastKA, ack: a.ack}, {ps: b, lastKA: b.lastKA}, {ps: c, lastKA: c.lastKA}}
	epoch := uint64(3)
	wake := applyReply(&epoch, all, items, api.KeepAliveBatchResponse{Epoch: 3, Sessions: []api.BatchSession{
		{Session: 1, LeaseMS: 12000, Events: []api.Event{{Seq: 5}, {Seq: 6, Type: api.EventInvalidate}}},
		{Session: 2, LeaseMS: 5000},
		{Session: 3, Error: api.Errorf(api.CodeSessionExpired, "expired")},
	}})
	if !a.base.Equal(a.lastKA) || !b.base.Equal(t0) {
		t.Fatalf("bases %v %v: a confirmed batch renews from the KeepAlives it carried", a.base, b.base)
	}
	if len(a.events) != 2 || a.events[0].Seq != 5 || a.events[1].Seq != 6 {
		t.Fatalf("events %+v: acknowledged dropped, new appended once", a.events)
	}
	if b.lease != 5*time.Second || c.err == nil || a.sentAck != (ack{3, 4}) {
		t.Fatalf("lease %v err %v sentAck %v", b.lease, c.err, a.sentAck)
	}
	if len(wake) != 3 {
		t.Fatalf("woke %d sessions, want 3 (events, first confirmation, end)", len(wake))
	}
	// A session the batch did not carry gets its events too (a poll).
	d := &proxySession{id: 4, lease: lease, lastKA: t0, base: t0}
	all[4] = d
	wake = applyReply(&epoch, all, nil, api.KeepAliveBatchResponse{Epoch: 3, Sessions: []api.BatchSession{{Session: 4, Events: []api.Event{{Seq: 8}}}}})
	if len(d.events) != 1 || len(wake) != 1 || !d.base.Equal(t0) {
		t.Fatalf("poll reply: events %+v, woke %d, base %v", d.events, len(wake), d.base)
	}
	// A new leader: the old leadership's events go.
	wake = applyReply(&epoch, all, items[:1], api.KeepAliveBatchResponse{Epoch: 4})
	if epoch != 4 || len(a.events) != 0 {
		t.Fatalf("epoch %d events %+v", epoch, a.events)
	}
	if len(wake) < len(all) {
		t.Fatalf("woke %d of %d sessions on a new epoch: every held KeepAlive must answer", len(wake), len(all))
	}
}

func TestClientAckOfInvalidationIsUrgent(t *testing.T) {
	ps := &proxySession{ack: ack{7, 0}, events: []api.Event{{Seq: 1, Type: api.EventDataChanged}, {Seq: 2, Type: api.EventInvalidate}}}
	if ps.clientAck(ack{7, 1}, 7) {
		t.Fatal("an ack of a watch event is not urgent")
	}
	if !ps.clientAck(ack{7, 2}, 7) {
		t.Fatal("an ack of an invalidation is urgent: a write waits for it")
	}
	if len(ps.pending(7)) != 0 {
		t.Fatalf("pending %+v after the ack", ps.pending(7))
	}
	if !ps.clientAck(ack{8, 0}, 8) {
		t.Fatal("the first ack under a new epoch is urgent: the new leader's cache fence waits for it")
	}
}

func testTable() *cellTable {
	return newCellTable(context.Background(), "demo", "p1", "p1/test", nil, newMetrics(prometheus.NewRegistry(), &Proxy{}))
}

// TestKeepAliveReportsTheLeaseAge: the proxy answers at once from its
// last confirmed batch, telling the client how old the lease it confirms
// is, so the client's lease clock never runs ahead of the cell's.
func TestKeepAliveReportsTheLeaseAge(t *testing.T) {
	tb := testTable()
	now := time.Now()
	tb.lastOK, tb.lastReply = now, now
	tb.epoch = 3
	tb.sessions[1] = &proxySession{id: 1, lease: 12 * time.Second, lastKA: now.Add(-3 * time.Second), base: now.Add(-1500 * time.Millisecond)}
	resp, err := tb.keepAlive(context.Background(), api.KeepAliveRequest{Cell: "demo", Session: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	if resp.LeaseAgeMS != 1500 || resp.Epoch != 3 || resp.LeaseMS != 12000 {
		t.Fatalf("reply %+v: want the lease confirmed 1500 ms before the request", resp)
	}
	if !tb.sessions[1].lastKA.Equal(now) {
		t.Fatal("the KeepAlive must be recorded for the next batch")
	}
}

func TestKeepAliveHeldUntilEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := testTable()
		now := time.Now()
		tb.lastOK, tb.lastReply, tb.epoch = now, now, 3
		ps := &proxySession{id: 1, lease: 12 * time.Second, lastKA: now, base: now}
		tb.sessions[1] = ps
		got := make(chan api.SessionResponse, 1)
		go func() {
			resp, err := tb.keepAlive(context.Background(), api.KeepAliveRequest{Cell: "demo", Session: 1, WaitMS: 30_000}, time.Now())
			if err != nil {
				t.Error(err)
			}
			got <- resp
		}()
		synctest.Wait() // the KeepAlive is held
		tb.mu.Lock()
		held := ps.waiter != nil
		if held {
			ps.events = append(ps.events, api.Event{Seq: 1, Type: api.EventDeleted, Path: "/demo/x"})
			tb.wakeLocked(ps)
		}
		tb.mu.Unlock()
		if !held {
			t.Fatal("the KeepAlive was not held")
		}
		synctest.Wait()
		select {
		case resp := <-got:
			if len(resp.Events) != 1 || resp.Events[0].Seq != 1 {
				t.Fatalf("reply %+v", resp)
			}
		default:
			t.Fatal("an event did not release the held KeepAlive")
		}
		// An ended session answers its end.
		tb.mu.Lock()
		ps.err = api.Errorf(api.CodeSessionExpired, "ended")
		tb.mu.Unlock()
		if _, err := tb.keepAlive(context.Background(), api.KeepAliveRequest{Cell: "demo", Session: 1}, time.Now()); api.CodeOf(err) != api.CodeSessionExpired {
			t.Fatalf("err %v, want session_expired", err)
		}
	})
}

func TestBatchWaitScalesWithTheLease(t *testing.T) {
	for _, c := range []struct{ lease, want time.Duration }{
		{12 * time.Second, time.Second}, {time.Minute, time.Second}, {3 * time.Second, 250 * time.Millisecond}, {time.Second, 100 * time.Millisecond},
	} {
		if got := batchWaitFor(c.lease); got != c.want {
			t.Errorf("lease %v: wait %v, want %v", c.lease, got, c.want)
		}
	}
}

// TestKeepAliveAnswersANewEpochAtOnce: a client that acknowledged under
// an older leader is answered at once, not at the end of its long poll.
func TestKeepAliveAnswersANewEpochAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := testTable()
		now := time.Now()
		tb.lastOK, tb.lastReply, tb.epoch = now, now, 5
		tb.sessions[1] = &proxySession{id: 1, lease: 12 * time.Second, lastKA: now, base: now}
		done := make(chan api.SessionResponse, 1)
		go func() {
			resp, err := tb.keepAlive(context.Background(), api.KeepAliveRequest{Cell: "demo", Session: 1, WaitMS: 30_000, AckEpoch: 4, AckSeq: 2}, time.Now())
			if err != nil {
				t.Error(err)
			}
			done <- resp
		}()
		synctest.Wait()
		select {
		case resp := <-done:
			if resp.Epoch != 5 {
				t.Fatalf("reply %+v", resp)
			}
		default:
			t.Fatal("a client behind the leader's epoch was held")
		}
	})
}

// TestApplyReplyRenewsOnlyWhatTheLeaderRenewed: an item the reply
// refuses, for whatever reason, keeps its lease base (the client is told
// the age of the lease the cell really has); only an item the leader
// renewed (absent from the reply, or listed without an error) moves it.
// `unavailable` is what a leader answers for a session whose expiry is in
// flight: taking it for a renewal told the client its lease was fresh
// while the expiry committed (issue 23, finding 6).
func TestApplyReplyRenewsOnlyWhatTheLeaderRenewed(t *testing.T) {
	lease := 12 * time.Second
	base := t0.Add(-11 * time.Second)
	cases := []struct {
		name    string
		reply   *api.BatchSession // nil: not listed (renewed, nothing to say)
		renewed bool
		ended   bool
	}{
		{"not listed", nil, true, false},
		{"listed with events", &api.BatchSession{LeaseMS: 12000, Events: []api.Event{{Seq: 1}}}, true, false},
		{"expiry in flight", &api.BatchSession{Error: api.Errorf(api.CodeUnavailable, "session 1 lease ran out; expiry in flight")}, false, false},
		{"unknown to a new leader", &api.BatchSession{Error: api.Errorf(api.CodeUnavailable, "session 1 not yet known to the leader")}, false, false},
		{"not leading any more", &api.BatchSession{Error: api.Errorf(api.CodeNotLeader, "not the leader")}, false, false},
		{"expired", &api.BatchSession{Error: api.Errorf(api.CodeSessionExpired, "expired")}, false, true},
		{"unknown session", &api.BatchSession{Error: api.Errorf(api.CodeNoSession, "no session")}, false, true},
		{"wrong secret", &api.BatchSession{Error: api.Errorf(api.CodeUnauthorized, "wrong secret")}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := &proxySession{id: 1, lease: lease, lastKA: t0, base: base, awaitBatch: true}
			all := map[uint64]*proxySession{1: ps}
			resp := api.KeepAliveBatchResponse{Epoch: 3}
			if tc.reply != nil {
				r := *tc.reply
				r.Session = 1
				resp.Sessions = []api.BatchSession{r}
			}
			epoch := uint64(3)
			wake := applyReply(&epoch, all, []batchItem{{ps: ps, lastKA: t0}}, resp)
			if got := ps.base.Equal(t0); got != tc.renewed {
				t.Fatalf("lease base %v (client told the lease began %v before its KeepAlive), renewed=%v: want renewed=%v",
					ps.base, t0.Sub(ps.base), got, tc.renewed)
			}
			if !tc.renewed && !ps.base.Equal(base) {
				t.Fatalf("lease base moved to %v on a refusal", ps.base)
			}
			if (ps.err != nil) != tc.ended {
				t.Fatalf("session error %v, want ended=%v", ps.err, tc.ended)
			}
			if !tc.renewed && !tc.ended && len(wake) != 0 {
				t.Fatalf("woke %d sessions on a refusal: the held KeepAlive waits for a batch that renews it", len(wake))
			}
		})
	}
}

// A client that never acknowledges, while its leader keeps sending (and
// replacing its own queue with resyncs), costs the proxy at most
// api.MaxPendingEvents events: past it one resync at the newest Seq
// stands for them all.
func TestLeaderEventsCappedWithResync(t *testing.T) {
	ps := &proxySession{id: 1, lease: 12 * time.Second}
	seq := uint64(0)
	for round := 0; round < 3; round++ {
		evs := make([]api.Event, 0, api.MaxPendingEvents)
		for range api.MaxPendingEvents {
			seq++
			evs = append(evs, api.Event{Type: api.EventDataChanged, Path: "/demo/x", Index: seq, Seq: seq})
		}
		applySessionReply(ps, api.BatchSession{Session: 1, LeaseMS: 12000, Events: evs}, 3, true)
		if len(ps.events) > api.MaxPendingEvents {
			t.Fatalf("round %d: the proxy holds %d events for one client, over %d", round, len(ps.events), api.MaxPendingEvents)
		}
	}
	last := ps.events[len(ps.events)-1]
	if last.Seq != seq {
		t.Fatalf("the newest event held has Seq %d, want %d: acknowledging it must acknowledge all", last.Seq, seq)
	}
	if len(ps.events) == 1 && last.Type != api.EventResync {
		t.Fatalf("one event %+v stands for many: want a resync", last)
	}
}
