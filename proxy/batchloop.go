package proxy

// The batches this proxy sends a cell's leader: the main loop (a full
// batch once a period, polls between), urgent batches, parts sent at once,
// halves of a part refused whole, and each part's reply applied.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/sdk"
)

// run sends the main batches until ctx ends: a full one (every session)
// once a period, each held by the leader until one of this proxy's
// sessions has an event or the period ends; after an event, polls with
// only what there is to acknowledge until the next full one is due.
func (t *cellTable) run(ctx context.Context) {
	period := batchWaitFor(t.prune(time.Now()))
	var lastFull time.Time
	for ctx.Err() == nil {
		start := time.Now()
		kind, wait := fullBatch, period
		if due := lastFull.Add(period); start.Before(due) {
			kind, wait = pollBatch, due.Sub(start)
		}
		built, err := t.send(ctx, kind, wait)
		if kind == fullBatch && err == nil {
			lastFull = built
		}
		period = batchWaitFor(t.prune(time.Now()))
		pause := minBatchGap - time.Since(start)
		switch {
		case errors.Is(err, errNothing):
			pause = period
		case err != nil:
			pause = 200 * time.Millisecond
		}
		if pause > 0 {
			sleep(ctx, pause)
		}
	}
}

// runUrgent sends urgent batches (no wait at the leader) when kicked.
func (t *cellTable) runUrgent(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
		}
		sleep(ctx, urgentGather)
		if _, err := t.send(ctx, urgentBatch, 0); err != nil && !errors.Is(err, errNothing) {
			sleep(ctx, 50*time.Millisecond)
		}
	}
}

// send builds one batch of kind, sends it (in parts of at most
// api.MaxProxyBatchSessions sessions and api.MaxProxyBatchBytes, at once)
// and applies each part's reply; it returns when the batch was built (its
// renewals count from then).
func (t *cellTable) send(ctx context.Context, kind batchKind, wait time.Duration) (time.Time, error) {
	t.mu.Lock()
	built := time.Now()
	req, items, ended := buildBatch(t.name, t.proxy, t.epoch, t.sessions, built, kind, wait, t.live)
	for _, ps := range ended {
		t.wakeLocked(ps)
	}
	none := len(t.sessions) == 0
	t.mu.Unlock()
	if none || (len(items) == 0 && kind != pollBatch) {
		return built, errNothing
	}
	t.m.batchSessions.WithLabelValues(t.name).Set(float64(len(items)))
	parts := splitBatch(req, items, api.MaxProxyBatchSessions, api.MaxProxyBatchBytes)
	if len(parts) == 1 {
		return built, t.sendPart(ctx, kind, built, parts[0], 0)
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = t.sendPart(ctx, kind, built, part, 0)
		}()
	}
	wg.Wait()
	return built, errors.Join(errs...)
}

// maxSplitDepth bounds the halving of a refused batch: a part of
// api.MaxProxyBatchSessions reaches single sessions within it.
const maxSplitDepth = 16

// sendPart sends one part of a batch and applies its reply. The call,
// retries included, is bounded (the leader's wait + api.ProxyBatchTimeout):
// a part that fails is not resent as it was; the next batch is built
// afresh. A part the leader refuses as a whole (its content, not the
// cell's state) is sent again in halves, and a single session so refused
// ends here: one bad session never stalls the others.
func (t *cellTable) sendPart(ctx context.Context, kind batchKind, built time.Time, part batchPart, depth int) error {
	body := wireBatch{KeepAliveBatchRequest: &part.req, wire: part.req.AppendWire(nil)}
	if len(body.wire) > api.MaxProxyBatchBytes && len(part.items) > 1 && !mutant.On(mutant.BatchSplit) {
		return t.sendHalves(ctx, kind, built, part, depth)
	}
	t.m.batches.WithLabelValues(t.name).Inc()
	wait := time.Duration(part.req.WaitMS) * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, wait+api.ProxyBatchTimeout)
	if mutant.On(mutant.BatchSplit) {
		cctx, cancel = context.WithCancel(ctx) // resent until it goes through
	}
	var resp api.KeepAliveBatchResponse
	err := t.up.ForwardWire(cctx, t.name, api.RouteKeepAliveBatch, body, &resp, sdk.ForwardOptions{
		KeepAlive: true, RetryUnsure: true, Timeout: wait + 3*time.Second, Own: true})
	cancel()
	if err == nil {
		t.applyPart(built, part, resp)
		return nil
	}
	t.m.batchErrors.WithLabelValues(t.name).Inc()
	if refusedWhole(err) && !mutant.On(mutant.BatchSplit) {
		if len(part.items) > 1 && depth < maxSplitDepth {
			return t.sendHalves(ctx, kind, built, part, depth)
		}
		t.dropRefused(part, err)
		return err
	}
	if kind == urgentBatch {
		t.mu.Lock()
		for _, it := range part.items {
			it.ps.urgent = true
		}
		t.mu.Unlock()
	}
	return err
}

// sendHalves sends a part again as two, without a wait at the leader.
func (t *cellTable) sendHalves(ctx context.Context, kind batchKind, built time.Time, part batchPart, depth int) error {
	part.req.WaitMS = 0
	var errs []error
	for _, h := range part.halves() {
		errs = append(errs, t.sendPart(ctx, kind, built, h, depth+1))
	}
	return errors.Join(errs...)
}

// refusedWhole: the leader refused a batch for what it carries (a
// request that cannot succeed as it is), not for the cell's state.
func refusedWhole(err error) bool {
	switch api.CodeOf(err) {
	case api.CodeBadRequest, api.CodeValueTooLarge, api.CodeLimitExceeded:
		return true
	}
	return false
}

// dropRefused ends the sessions of a part the leader refused as a whole
// (at most one, once halved): their clients are told why.
func (t *cellTable) dropRefused(part batchPart, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, it := range part.items {
		if it.ps.err == nil {
			it.ps.err = api.Errorf(api.CodeBadRequest, "the cell refused to renew session %d through this proxy: %v", it.ps.id, err)
			t.wakeLocked(it.ps)
		}
	}
}

// applyPart applies a part's reply.
func (t *cellTable) applyPart(built time.Time, part batchPart, resp api.KeepAliveBatchResponse) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ps := range applyReply(&t.epoch, t.sessions, part.items, resp) {
		t.wakeLocked(ps)
	}
	t.index = max(t.index, resp.Index)
	if len(part.items) > 0 && built.After(t.lastOK) {
		t.lastOK = built
	}
	t.lastReply = time.Now()
	t.batches++
}

// batchWait is the main batch's wait for sessions whose shortest lease is
// minLease.
func batchWaitFor(minLease time.Duration) time.Duration {
	return max(min(batchWait, minLease/12), minBatchWait)
}
