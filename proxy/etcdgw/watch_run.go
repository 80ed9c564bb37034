package etcdgw

import (
	"context"
	"errors"
	"time"

	"github.com/lockservice/lockd/api"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// watchTiming are a stream's watch intervals: the named constants,
// shortened by unit tests.
type watchTiming struct {
	grantRecheck time.Duration
	progress     time.Duration
}

// watchTimes is what every gateway runs with (unit tests shorten it
// before they start a gateway).
var watchTimes = watchTiming{grantRecheck: WatchGrantRecheck, progress: ProgressInterval}

// run follows wt's feed stream until wt ends: events as they come,
// progress answers when asked for, the grant checked again every
// grantRecheck.
func (ws *watchStream) run(ctx context.Context, wt *watch) {
	defer wt.finish()
	defer wt.stream.close()
	t := watchTimes
	m := newEventMaker(ws.g, wt)
	lastSend, lastGrant := time.Now(), time.Now()
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, min(t.grantRecheck, t.progress))
		b, err := wt.stream.read(rctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			sent, err := ws.sendEvents(wt, m, b)
			if err != nil {
				return // the stream is gone
			}
			if sent {
				lastSend = time.Now()
			}
		case !errors.Is(err, context.DeadlineExceeded):
			ws.end(ctx, wt, err)
			return
		}
		if time.Since(lastGrant) >= t.grantRecheck {
			lastGrant = time.Now()
			if _, err := ws.g.grant(ctx, ws.w, wt.span); isDenied(err) {
				ws.end(ctx, wt, errWatchDenied)
				return
			}
		}
		if wt.progress && time.Since(lastSend) >= t.progress {
			lastSend = time.Now()
			if ws.send(&pb.WatchResponse{Header: wt.header(ws.g, wt.synced.Load()), WatchId: wt.id}) != nil {
				return
			}
		}
	}
}

// errWatchDenied ends a watch whose grant check failed.
var errWatchDenied = errors.New(permissionDenied)

// isDenied: the lockd refused the caller's read (its token revoked or
// its grant gone). Other failures (no leader) leave the watch running.
func isDenied(err error) bool {
	c := api.CodeOf(err)
	return err != nil && (c == api.CodeForbidden || c == api.CodeUnauthorized)
}

// header is an answer's header at index of wt's epoch.
func (wt *watch) header(g *Gateway, index uint64) *pb.ResponseHeader {
	return g.header(PrefixInfo{Prefix: wt.span.Prefix.Prefix, Cell: wt.span.Prefix.Cell, Epoch: wt.epoch}, index)
}

// sendEvents sends b's events for wt (in answers of at most
// MaxWatchResponseBytes) and records how far wt is synced.
func (ws *watchStream) sendEvents(wt *watch, m *eventMaker, b feedBatch) (bool, error) {
	events := m.events(b)
	parts := chunks(events)
	for i, part := range parts {
		r := &pb.WatchResponse{Header: wt.header(ws.g, b.through), WatchId: wt.id, Events: part}
		r.Fragment = wt.fragment && i < len(parts)-1
		if err := ws.send(r); err != nil {
			return false, err
		}
	}
	if b.through >= wt.start {
		wt.synced.Store(b.through)
	}
	return len(parts) > 0, nil
}

// end answers a watch that ended on its own: compacted (a gap in the
// ring, or the prefix moved), or canceled with the reason.
func (ws *watchStream) end(ctx context.Context, wt *watch, why error) {
	if !ws.remove(wt) {
		return
	}
	r := &pb.WatchResponse{Header: wt.header(ws.g, wt.synced.Load()), WatchId: wt.id, Canceled: true}
	var ce *compactedError
	switch {
	case errors.As(why, &ce):
		r.CompactRevision = rev(wt.epoch, max(ce.floor, wt.synced.Load()+1))
	case errors.Is(why, errFeedCompacted):
		r.CompactRevision = rev(wt.epoch, wt.synced.Load()+1)
	case errors.Is(why, errFeedMoved):
		r.CompactRevision, r.Header = ws.movedRevision(ctx, wt)
	default:
		r.CancelReason = why.Error()
	}
	_ = ws.send(r)
}

// movedRevision is the compact revision of a watch whose prefix moved:
// the prefix's revision now (of its new epoch), read with the proxy's
// credentials; the client re-reads and watches again from there.
func (ws *watchStream) movedRevision(ctx context.Context, wt *watch) (int64, *pb.ResponseHeader) {
	var resp api.RangeResponse
	root := wt.span.Prefix.Prefix
	err := ws.g.be.CallOwn(ctx, api.RouteRange, &api.RangeRequest{Root: root, Start: root, CountOnly: true}, &resp)
	if err != nil || resp.Epoch == 0 {
		return rev(wt.epoch, wt.synced.Load()+1), wt.header(ws.g, wt.synced.Load())
	}
	p := PrefixInfo{Prefix: root, Epoch: resp.Epoch}
	return rev(resp.Epoch, max(resp.Index, 1)), ws.g.header(p, resp.Index)
}
