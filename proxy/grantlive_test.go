package proxy

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// TestProxyGrantLiveBetweenReplies: a caching client through a proxy, in
// a quiet cell. The proxy's own session renews every
// api.CacheKeepAliveWait (500 ms), so what its window has left is 0.97 to
// 1.47 s; the leader holds each full batch for batchWait (1 s). The client
// polls 500 ms (Session.renewWait) and serves until its send plus the
// reply's cache_ms (Session.proxyCacheUntil). Its recent lease lets the
// proxy answer at the wait's end instead of waiting for the next batch
// (maxAnsweredLeaseAge), so the grant is renewed before it ends: the
// attack on short grants measured it live 73 % of the time when every
// reply waited for a batch. Logs the share; fails under 85 % (a loaded
// machine may delay a reply now and then).
func TestProxyGrantLiveBetweenReplies(t *testing.T) {
	lease := 12 * time.Second
	w := api.CacheWindowFor(lease)
	ownLeft := w - w/50 // the proxy's own window less the drift margin
	tb := testTable()
	start := time.Now()
	tb.sharedCache = func(string) (uint64, time.Duration) {
		// The proxy's own session: confirmed every CacheKeepAliveWait.
		since := time.Since(start) % api.CacheKeepAliveWait(lease)
		return 77, ownLeft - since
	}
	now := time.Now()
	tb.lastOK, tb.lastReply, tb.epoch = now, now, 3
	ps := newProxySession(1)
	ps.lease, ps.lastKA, ps.base, ps.ack, ps.knowsMe, ps.secret = lease, now, now, ack{3, 0}, true, "s1"
	tb.sessions[1] = ps

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the batch loop against a quiet leader (cellTable.run)
		defer wg.Done()
		for ctx.Err() == nil {
			tb.mu.Lock()
			built := time.Now()
			req, items, _ := buildBatch(tb.name, tb.proxy, tb.epoch, tb.sessions, built, fullBatch, batchWait, nil)
			tb.mu.Unlock()
			sleep(ctx, batchWait) // held by the leader: no events
			tb.applyPart(built, batchPart{req: req, items: items}, api.KeepAliveBatchResponse{Epoch: 3})
		}
	}()

	run := 4 * time.Second
	var on, total time.Duration
	var grantEnd time.Time
	var gaps []time.Duration
	end := time.Now().Add(run)
	for time.Now().Before(end) {
		sent := time.Now()
		resp, err := tb.keepAlive(ctx, api.KeepAliveRequest{Cell: "demo", Session: 1, Secret: "s1", WaitMS: api.CacheKeepAliveWait(lease).Milliseconds(), Proxy: tb.instance, AckEpoch: 3}, sent)
		if err != nil {
			t.Fatal(err)
		}
		got := time.Now()
		if !grantEnd.IsZero() { // the time from the last reply to this one
			total += got.Sub(sent)
			if grantEnd.After(got) {
				on += got.Sub(sent)
			} else {
				on += max(grantEnd.Sub(sent), 0)
				gaps = append(gaps, got.Sub(grantEnd).Round(time.Millisecond))
			}
		}
		grantEnd = sent.Add(time.Duration(resp.CacheMS) * time.Millisecond) // Session.confirmed
	}
	cancel()
	wg.Wait()
	frac := float64(on) / float64(total)
	t.Logf("window %v: the client's proxy grant was live %.0f%% of %v; lapses %v", w, 100*frac, total.Round(time.Millisecond), gaps)
	if frac < 0.85 {
		t.Fatalf("through a proxy the short grant lapses between KeepAlive replies: cache on only %.0f%% of the time", 100*frac)
	}
}
