package etcdgw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Watch (docs/etcd.md, "Watch"): a bidirectional stream of create,
// cancel and progress requests, several watches per stream. Each watch
// is one subscriber of the change feed (changes.go) with its span's
// read grant checked with the caller's token at create (watch_create.go)
// and re-checked every WatchGrantRecheck (watch_run.go).

// Bounds of watches.
const (
	// MaxWatchesPerStream bounds the watches one stream holds at once; a
	// create beyond it is answered created and canceled.
	MaxWatchesPerStream = 1000
	// MaxWatchStreamsPerCredential bounds the watch streams one
	// credential (one API token; everyone with auth off) holds open at
	// one gateway.
	MaxWatchStreamsPerCredential = 256
	// ProgressInterval is how often a watch created with progress_notify
	// and no events since its last answer gets an empty answer carrying
	// the revision it is synced to (etcd's default is 10 minutes; this
	// gateway is quicker so that clients resume from recent revisions).
	ProgressInterval = 5 * time.Second
	// WatchGrantRecheck is how often a watch's read grant is checked
	// again (the caller's token may have been revoked or its grant
	// removed): a failing check cancels the watch PermissionDenied.
	WatchGrantRecheck = 2 * api.ProxyAuthRefresh
	// MaxWatchResponseBytes bounds the events one watch answer carries
	// (keys, values and previous values): more go in further answers
	// (marked Fragment when the watch asked for fragments).
	MaxWatchResponseBytes = 1 << 20
	// MaxWatchesPerTenant bounds one tenant's watches at one gateway,
	// every stream and credential of it together, so that one tenant
	// cannot fill the gateway's MaxFeedSubscribers (which every other
	// tenant's watches need) on its own (attack review, session 34).
	MaxWatchesPerTenant = MaxFeedSubscribers / 8
	// MaxPrevKVKeys bounds the previous values one prev_kv watch keeps to
	// answer prev_kv of puts; a key beyond it gets no prev_kv on a put
	// (deletes always carry it).
	MaxPrevKVKeys = 10_000
)

// permissionDenied is the cancel reason of a watch refused or ended for
// lack of the read grant: etcd's own message, which clients map back to
// rpctypes.ErrPermissionDenied.
var permissionDenied = errorDesc(errPermissionDenied)

var errPermissionDenied = status.Error(codes.PermissionDenied, "etcdserver: permission denied")

// errorDesc is the message of a gRPC status (an error's text otherwise).
func errorDesc(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// Watch serves one watch stream until the client ends it or the gateway
// closes.
func (s *watchServer) Watch(srv pb.Watch_WatchServer) error {
	g := s.g
	w, err := g.who(srv.Context())
	if err != nil {
		return err
	}
	cred := w.caller.Digest()
	if !g.counts.take(countWatchStreams, cred, MaxWatchStreamsPerCredential) {
		return status.Errorf(codes.ResourceExhausted, "lockd etcd gateway: this credential holds %d watch streams at this gateway (MaxWatchStreamsPerCredential); put several watches on one stream", MaxWatchStreamsPerCredential)
	}
	defer g.counts.give(countWatchStreams, cred)
	ctx, cancel := context.WithCancel(srv.Context())
	defer cancel()
	ws := &watchStream{g: g, srv: srv, w: w, ctx: ctx, watches: make(map[int64]*watch)}
	defer ws.cancelAll()
	done := make(chan error, 1)
	go func() { done <- ws.recvLoop() }()
	select {
	case err := <-done:
		return err
	case <-g.ctx.Done():
		return status.Error(codes.Unavailable, "lockd etcd gateway: the gateway is closing")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchStream is one client stream.
type watchStream struct {
	g   *Gateway
	srv pb.Watch_WatchServer
	w   who
	ctx context.Context

	sendMu sync.Mutex // one Send at a time

	mu      sync.Mutex
	watches map[int64]*watch
	nextID  int64 // the next id to try assigning
}

// watch is one watch of a stream.
type watch struct {
	id       int64
	span     keySpan
	epoch    uint64
	start    uint64 // the first index whose events are sent
	prevKV   bool
	progress bool
	fragment bool
	noPut    bool
	noDelete bool

	stream *feedStream
	cancel context.CancelFunc
	done   chan struct{}
	// release gives back the watch's place in its tenant's count
	// (MaxWatchesPerTenant); finish calls it once, as done closes.
	release func()
	// synced is the index every event up to which was sent (for
	// progress answers, read by the stream's receiver).
	synced atomic.Uint64
}

// recvLoop reads requests until the client ends the stream.
func (ws *watchStream) recvLoop() error {
	for {
		req, err := ws.srv.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch r := req.RequestUnion.(type) {
		case *pb.WatchRequest_CreateRequest:
			err = ws.create(r.CreateRequest)
		case *pb.WatchRequest_CancelRequest:
			err = ws.cancelWatch(r.CancelRequest.WatchId)
		case *pb.WatchRequest_ProgressRequest:
			err = ws.progress()
		}
		if err != nil {
			return err
		}
	}
}

// send sends one answer.
func (ws *watchStream) send(r *pb.WatchResponse) error {
	ws.sendMu.Lock()
	defer ws.sendMu.Unlock()
	return ws.srv.Send(r)
}

// cancelWatch ends a watch at the client's request.
func (ws *watchStream) cancelWatch(id int64) error {
	ws.mu.Lock()
	wt := ws.watches[id]
	delete(ws.watches, id)
	ws.mu.Unlock()
	if wt == nil {
		// etcd answers a cancel of an unknown id canceled as well.
		return ws.send(&pb.WatchResponse{Header: ws.g.plainHeader(), WatchId: id, Canceled: true})
	}
	wt.cancel()
	<-wt.done // no event of the watch follows its canceled answer
	return ws.send(&pb.WatchResponse{Header: ws.g.header(wt.span.Prefix, wt.synced.Load()), WatchId: id, Canceled: true})
}

// progress answers a progress request: one answer (watch id -1) with
// the revision the stream's first watch is synced to. Revisions of two
// prefixes are not comparable: a stream watching several prefixes gets
// its lowest-id watch's (docs/etcd.md, "Watch").
func (ws *watchStream) progress() error {
	ws.mu.Lock()
	var first *watch
	for _, wt := range ws.watches {
		if first == nil || wt.id < first.id {
			first = wt
		}
	}
	ws.mu.Unlock()
	h := ws.g.plainHeader()
	if first != nil {
		h = &pb.ResponseHeader{ClusterId: clusterID, MemberId: ws.g.memberID, Revision: rev(first.epoch, first.synced.Load()), RaftTerm: first.epoch}
	}
	return ws.send(&pb.WatchResponse{Header: h, WatchId: -1})
}

// cancelAll ends every watch of the stream (the stream ended).
func (ws *watchStream) cancelAll() {
	ws.mu.Lock()
	all := ws.watches
	ws.watches = map[int64]*watch{}
	ws.mu.Unlock()
	for _, wt := range all {
		wt.cancel()
	}
	for _, wt := range all {
		<-wt.done
	}
}

// remove drops a watch that ended on its own; false if the client
// canceled it meanwhile (then the cancel answers it).
func (ws *watchStream) remove(wt *watch) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.watches[wt.id] != wt {
		return false
	}
	delete(ws.watches, wt.id)
	return true
}

// refuse answers a create that starts no watch (etcd: created and
// canceled, watch id -1, the reason in CancelReason).
func (ws *watchStream) refuse(reason string) error {
	return ws.send(&pb.WatchResponse{Header: ws.g.plainHeader(), WatchId: -1, Created: true, Canceled: true, CancelReason: reason})
}

// limitReason is the cancel reason of a create over MaxWatchesPerStream.
var limitReason = fmt.Sprintf("lockd etcd gateway: this stream holds %d watches (MaxWatchesPerStream); cancel some or open another stream", MaxWatchesPerStream)

// finish marks wt ended: done closes and its place in its tenant's count
// is given back. Called once, by whoever ends the watch.
func (wt *watch) finish() {
	close(wt.done)
	if wt.release != nil {
		wt.release()
	}
}

// watchTenantReason is the cancel reason of a create past
// MaxWatchesPerTenant.
var watchTenantReason = fmt.Sprintf("lockd etcd gateway: this tenant holds %d watches at this gateway (MaxWatchesPerTenant); cancel some", MaxWatchesPerTenant)

// takeWatch counts one more watch of w's tenant; false at
// MaxWatchesPerTenant. release gives it back.
func (g *Gateway) takeWatch(w who) (release func(), ok bool) {
	if mutant.On(mutant.EtcdWatchCap) {
		return func() {}, true // broken: one tenant may fill MaxFeedSubscribers
	}
	tenant := tenantOf(w)
	if !g.counts.take(countWatches, tenant, MaxWatchesPerTenant) {
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(func() { g.counts.give(countWatches, tenant) }) }, true
}
