package etcdgw

import (
	"context"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// duplicateIDReason answers a create naming a watch id the stream uses
// (etcd's mvcc message).
const duplicateIDReason = "mvcc: duplicate watch ID provided on the WatchStream"

// create starts one watch: its span mapped, the caller's read grant on
// the span's root checked (and the current revision learnt) with a
// count-only range read on the caller's token, then the created answer,
// then either a compacted answer (a start revision the ring no longer
// holds, or of an older epoch) or the watch's events.
func (ws *watchStream) create(r *pb.WatchCreateRequest) error {
	sp, err := ws.g.keys.span(r.Key, r.RangeEnd)
	if err != nil {
		return ws.refuse(errorDesc(grpcError(err)))
	}
	cur, err := ws.g.grant(ws.ctx, ws.w, sp)
	if err != nil {
		return ws.refuse(grantReason(err))
	}
	epoch := cur.Epoch
	if epoch == 0 {
		epoch = sp.Prefix.Epoch
	}
	start, compacted := startIndex(r.StartRevision, epoch, cur.Index)
	wt := &watch{span: sp, epoch: epoch, start: start, prevKV: r.PrevKv, progress: r.ProgressNotify, fragment: r.Fragment, done: make(chan struct{})}
	for _, f := range r.Filters {
		wt.noPut = wt.noPut || f == pb.WatchCreateRequest_NOPUT
		wt.noDelete = wt.noDelete || f == pb.WatchCreateRequest_NODELETE
	}
	wt.synced.Store(start - 1)
	release, ok := ws.g.takeWatch(ws.w)
	if !ok {
		return ws.refuse(watchTenantReason)
	}
	wt.release = release
	ctx, cancel := context.WithCancel(ws.ctx)
	wt.cancel = cancel
	if reason, ok := ws.add(wt, r.WatchId); !ok {
		cancel()
		release()
		return ws.refuse(reason)
	}
	if err := ws.send(&pb.WatchResponse{Header: ws.g.header(sp.Prefix, cur.Index), WatchId: wt.id, Created: true}); err != nil {
		// The stream broke: the watch never runs, so it ends here (the
		// stream's cancelAll waits for its done).
		ws.remove(wt)
		cancel()
		wt.finish()
		return err
	}
	if compacted {
		ws.remove(wt)
		cancel()
		wt.finish()
		return ws.send(&pb.WatchResponse{Header: ws.g.header(sp.Prefix, cur.Index), WatchId: wt.id, Canceled: true, CompactRevision: rev(epoch, max(cur.Index, 1))})
	}
	return ws.startWatch(ctx, wt)
}

// add gives wt its id (want, or when want is 0 the next free one: etcd's
// AutoWatchID) and puts it on the stream; false with a reason if the
// stream is full or want is taken.
func (ws *watchStream) add(wt *watch, want int64) (string, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.watches) >= MaxWatchesPerStream {
		return limitReason, false
	}
	if want != 0 {
		if _, taken := ws.watches[want]; taken {
			return duplicateIDReason, false
		}
		wt.id = want
	} else {
		for { // ends: fewer than MaxWatchesPerStream ids are taken
			if _, taken := ws.watches[ws.nextID]; !taken {
				break
			}
			ws.nextID++
		}
		wt.id = ws.nextID
		ws.nextID++
	}
	ws.watches[wt.id] = wt
	return "", true
}

// startWatch opens wt's feed stream and runs it until ctx ends.
func (ws *watchStream) startWatch(ctx context.Context, wt *watch) error {
	var (
		fs  *feedStream
		err error
	)
	if wt.prevKV {
		fs, err = ws.g.changes.openWithHistory(wt.span.Prefix, wt.start, wt.epoch)
	} else {
		fs, err = ws.g.changes.open(wt.span.Prefix, wt.start, wt.epoch)
	}
	if err != nil {
		ws.remove(wt)
		wt.cancel()
		wt.finish()
		return ws.send(&pb.WatchResponse{Header: ws.g.plainHeader(), WatchId: wt.id, Canceled: true, CancelReason: errorDesc(grpcError(err))})
	}
	wt.stream = fs
	go ws.run(ctx, wt)
	return nil
}

// startIndex is the first index a watch sends events of: start
// revision 0 is "from now" (the index after the one read at create); a
// revision of another epoch than the prefix's current one is compacted
// (the prefix moved since: its indexes are another cell's).
func startIndex(startRev int64, epoch, index uint64) (start uint64, compacted bool) {
	if startRev <= 0 {
		return index + 1, false
	}
	e, i := unrev(startRev)
	if e != epoch {
		return index + 1, true
	}
	return max(i, 1), false
}

// grant checks the caller's read grant on sp's root with a count-only
// range read of the root alone on the caller's token (the lockd checks
// the grant on Root, and one node costs one lookup however large the
// span): the lockd refuses it exactly as it would the caller's own
// read. It answers the read's index and epoch.
func (g *Gateway) grant(ctx context.Context, w who, sp keySpan) (api.RangeResponse, error) {
	req := &api.RangeRequest{Root: sp.Root, Start: sp.Root, CountOnly: true}
	var resp api.RangeResponse
	if mutant.On(mutant.EtcdWatchACL) {
		return resp, g.be.CallOwn(ctx, api.RouteRange, req, &resp) // broken: the proxy's credentials
	}
	return resp, g.be.Call(ctx, w.token, api.RouteRange, req, &resp)
}

// grantReason is the cancel reason of a failed grant check.
func grantReason(err error) string {
	switch api.CodeOf(err) {
	case api.CodeForbidden, api.CodeUnauthorized:
		return permissionDenied
	}
	return errorDesc(grpcError(err))
}
