package proxy

// The proxy's shared cache and watch table. On each cell the proxy has a
// session of its own (its sdk client's): it reads into that session's
// cache for all its clients, and holds one server-side watch per path and
// kind for all of them. The leader invalidates the proxy's session like
// any cacher; the proxy passes the invalidation on, as a proxy event, to
// each client it served the value to as cacheable, and acknowledges the
// leader only once they all have (or their grant to serve from cache has
// run out). Watches fire to the clients that armed them, as proxy events.
//
// A client may serve a value the proxy made cacheable only while its
// KeepAlives go through this proxy instance (replies name it), and only
// within the grant each reply carries: what is left of the proxy's own
// cache window on the cell, which ends before the proxy's session lease
// does. A client that moves to another proxy flushes its cache and re-arms
// its watches there.
//
// Lock order: an sdk session's lock, then a cellTable's. Never call the
// sdk holding a cellTable's lock.

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// armKey is one watch a client armed through this proxy: the path and
// kind, and the cell index it was armed at.
type armKey struct {
	path  string
	kind  api.WatchKind
	index uint64
}

// gate is the proxy as its sdk client's AckGate: the shared session
// acknowledges an invalidation, or a new leader's epoch, only when the
// clients the proxy served cacheable values to have.
type gate struct{ p *Proxy }

func (g *gate) Invalidated(cell string, paths []string) <-chan struct{} {
	if t := g.p.existingTable(cell); t != nil {
		return t.invalidate(paths, brokenSharedAck)
	}
	return nil
}

func (g *gate) FailedOver(cell string, epoch uint64) <-chan struct{} {
	if t := g.p.existingTable(cell); t != nil {
		return t.failedOver(epoch)
	}
	return nil
}

func (p *Proxy) existingTable(cell string) *cellTable {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cells[cell]
}

// liveClientLocked is the client session id if its KeepAlives come to
// this proxy, the cell confirmed it through here, and its client speaks
// the shared cache's protocol: its KeepAlive named this proxy instance
// (an older SDK, which would neither drop values on a proxy event nor
// move its cache with its proxy, is forwarded as it always was).
func (t *cellTable) liveClientLocked(id uint64) *proxySession {
	ps := t.sessions[id]
	if ps == nil || ps.err != nil || ps.base.IsZero() || !ps.knowsMe {
		return nil
	}
	return ps
}

// pushLocked queues a proxy event for the client and wakes its KeepAlive.
func (t *cellTable) pushLocked(ps *proxySession, ev api.Event) uint64 {
	ps.pseq++
	ev.Seq = ps.pseq
	if len(ps.pevents) >= api.MaxPendingEvents {
		// Too far behind: one resync replaces them (the client flushes
		// its cache and re-reads what it watches).
		ps.pevents = append(ps.pevents[:0], api.Event{Type: api.EventResync, Seq: ev.Seq})
	} else {
		ps.pevents = append(ps.pevents, ev)
	}
	t.wakeLocked(ps)
	return ev.Seq
}

// proxyAckLocked records a client's acknowledgement of its proxy events.
func (t *cellTable) proxyAckLocked(ps *proxySession, seq uint64) {
	if seq <= ps.pack {
		return
	}
	ps.pack = seq
	i := 0
	for i < len(ps.pevents) && ps.pevents[i].Seq <= seq {
		i++
	}
	ps.pevents = ps.pevents[i:]
	t.notifyAcksLocked()
}

// notifyAcksLocked wakes whoever waits for client acknowledgements.
func (t *cellTable) notifyAcksLocked() {
	if t.acked != nil {
		close(t.acked)
		t.acked = nil
	}
}

// ackedChan is closed at the next client acknowledgement.
func (t *cellTable) ackedChanLocked() <-chan struct{} {
	if t.acked == nil {
		t.acked = make(chan struct{})
	}
	return t.acked
}

// flight is one read of the shared cache that several clients' reads of
// a path share (after an invalidation all of a proxy's clients miss at
// once). A read joins only a flight not yet sent, so the flight's read
// is linearized after every joiner's arrival: one already under way may
// have read before a write that completed before the joiner came. While
// one is under way, the next collects the reads that arrive and goes
// when it returns: two reads of a path at the cell at most, however many
// clients. gen is the table's gen when the flight went.
type flight struct {
	done chan struct{}
	prev *flight // under way when this one formed: it goes when prev returns
	gen  uint64
	resp api.GetResponse
	hit  bool
	err  error
}

// joinFlight returns the flight a read of path joins, and whether the
// caller leads it (sends it).
func (t *cellTable) joinFlight(path string) (*flight, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if nx := t.nextFlights[path]; nx != nil {
		return nx, false
	}
	f := &flight{done: make(chan struct{})}
	if cur := t.flights[path]; cur != nil {
		f.prev = cur
		t.nextFlights[path] = f
	} else {
		t.flights[path] = f
	}
	return f, true
}

// fly sends flight f (after the one under way, if any) and publishes its
// result.
func (t *cellTable) fly(p *Proxy, f *flight, path string) {
	if f.prev != nil {
		<-f.prev.done
		t.mu.Lock()
		if t.nextFlights[path] == f {
			delete(t.nextFlights, path)
		}
		if t.flights[path] == nil {
			t.flights[path] = f
		}
		t.mu.Unlock()
	}
	t.mu.Lock()
	f.gen = t.gen
	t.mu.Unlock()
	// Not the client's context: others wait on this read too.
	ctx, cancel := context.WithTimeout(p.ctx, sdk.DefaultRequestTimeout)
	f.resp, f.hit, f.err = p.up.SharedGet(ctx, t.name, path)
	cancel()
	t.mu.Lock()
	if t.flights[path] == f {
		delete(t.flights, path)
	}
	t.mu.Unlock()
	close(f.done)
}

// clientWait is one client a held acknowledgement waits for: until it
// acknowledges proxy event seq, or its grant runs out.
type clientWait struct {
	ps  *proxySession
	seq uint64
}

// invalidate passes the leader's invalidation of paths (nil: all) on to
// the clients the proxy served them to as cacheable, and returns a
// channel closed once they all acknowledged it (or their grant ran out,
// or they left).
func (t *cellTable) invalidate(paths []string, ackAtOnce bool) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	waits := t.invalidateLocked(paths)
	if len(waits) == 0 || ackAtOnce {
		return nil
	}
	return t.await(waits)
}

// invalidateLocked queues the invalidations, and returns the clients to
// wait for.
func (t *cellTable) invalidateLocked(paths []string) []clientWait {
	t.gen++
	if paths == nil {
		for path := range t.cachers {
			paths = append(paths, path)
		}
	}
	var waits []clientWait
	for _, path := range paths {
		for id := range t.cachers[path] {
			ps := t.sessions[id]
			if ps == nil {
				continue
			}
			delete(ps.cached, path)
			seq := t.pushLocked(ps, api.Event{Type: api.EventInvalidate, Path: path})
			t.m.invalidations.Inc()
			waits = append(waits, clientWait{ps, seq})
		}
		delete(t.cachers, path)
	}
	return waits
}

// sharedSessionLocked notes the proxy's own session on the cell as of a
// grant: when it changed (the last one ended), values served under the
// old one are invalidated first — the leader forgot that session as a
// cacher, and a grant counted from the new one would revive them. The
// events go out with the grant, so no wait is needed.
func (t *cellTable) sharedSessionLocked(id uint64) {
	if id == t.sharedID {
		return
	}
	if t.sharedID != 0 {
		t.invalidateLocked(nil)
	}
	t.sharedID = id
}

// failedOver: the cell has a new leader, which knows none of the proxy's
// cache. Every value the proxy served as cacheable is invalidated at its
// clients, and the proxy acknowledges the new epoch once they all have
// (or their grants ran out). Waiting instead for the clients to learn the
// epoch would not do: one may have learned it first, through a batch,
// and cached a value under it that only this proxy knows of.
func (t *cellTable) failedOver(uint64) <-chan struct{} {
	return t.invalidate(nil, false)
}

// await returns a channel closed once every wait is over.
func (t *cellTable) await(waits []clientWait) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			t.mu.Lock()
			now := time.Now()
			next := now.Add(time.Second)
			rest := waits[:0]
			for _, w := range waits {
				gone := t.sessions[w.ps.id] != w.ps
				if gone || w.ps.pack >= w.seq || !now.Before(w.ps.grantUntil) {
					continue
				}
				rest = append(rest, w)
				if w.ps.grantUntil.Before(next) {
					next = w.ps.grantUntil
				}
			}
			waits = rest
			if len(waits) == 0 {
				t.mu.Unlock()
				return
			}
			acked := t.ackedChanLocked()
			t.mu.Unlock()
			timer := time.NewTimer(time.Until(next))
			select {
			case <-acked:
			case <-timer.C:
			case <-t.ctx.Done():
				timer.Stop()
				return
			}
			timer.Stop()
		}
	}()
	return ch
}

// serveShared answers, from the proxy's own session, a client's cached
// read or watch: it reports false for any other request, or a client
// whose KeepAlives do not come here, which is forwarded as it is.
func (p *Proxy) serveShared(rc *fasthttp.RequestCtx, cell, route string) bool {
	switch route {
	case api.RouteGet, api.RouteChildren, api.RouteWatch:
	default:
		return false
	}
	t := p.existingTable(cell)
	if t == nil {
		return false
	}
	if route == api.RouteWatch {
		var req api.WatchRequest
		if json.Unmarshal(rc.PostBody(), &req) != nil || req.Session == 0 || len(req.Watches) > api.MaxWatchesPerCall {
			return false
		}
		if !t.isLiveClient(req.Session, req.Secret) || !p.mayRead(rc, watchPaths(req.Watches)...) {
			return false
		}
		cctx, cancel := p.requestContext(rc)
		defer cancel()
		resp, err := p.rearm(cctx, t, req)
		if api.CodeOf(err) == api.CodeLimitExceeded {
			return false // the proxy's session is full: the client's own holds them
		}
		reply(rc, resp, err)
		return true
	}
	var req api.ReadRequest
	if json.Unmarshal(rc.PostBody(), &req) != nil || req.Session == 0 || !t.isLiveClient(req.Session, req.Secret) || !p.mayRead(rc, req.Path) {
		return false
	}
	cctx, cancel := p.requestContext(rc)
	defer cancel()
	switch {
	case req.Watch != "":
		body, err := p.watchRead(cctx, t, route, req)
		if api.CodeOf(err) == api.CodeLimitExceeded {
			return false // the proxy's session is full: the client's own holds it
		}
		replyRaw(rc, body, err)
	case req.Cache && route == api.RouteGet:
		resp, err := p.cachedGet(cctx, t, req)
		reply(rc, resp, err)
	default:
		return false
	}
	return true
}

// isLiveClient: the session is a live client of this proxy (see
// liveClientLocked) and the request carries its secret, as the cell
// confirmed it. Anything else is forwarded, and the cell decides.
func (t *cellTable) isLiveClient(id uint64, secret string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.liveClientLocked(id)
	return ps != nil && ps.verified && subtle.ConstantTimeCompare([]byte(ps.secret), []byte(secret)) == 1
}

// mayRead reports whether the request's token may read every path, by
// the tenants in the proxy's directory view (it reads the directory as
// an admin). With no token of its own the cluster runs without auth. A
// token the view does not know is not refused here: the request is
// forwarded and the lockd, with a fresher view, decides.
func (p *Proxy) mayRead(rc *fasthttp.RequestCtx, paths ...string) bool {
	if p.cfg.Token == "" || brokenACL {
		return true
	}
	tok, err := api.BearerToken(string(rc.Request.Header.Peek(api.HeaderAuth)))
	if err != nil || tok == "" {
		return false
	}
	digest := api.TokenDigest(tok)
	for _, t := range p.up.Directory().Tenants {
		if !slices.Contains(t.Tokens, digest) {
			continue
		}
		for _, path := range paths {
			if !t.Allows(api.RoleRead, path) {
				return false
			}
		}
		return true
	}
	return false
}

func watchPaths(specs []api.WatchSpec) []string {
	out := make([]string, len(specs))
	for i, w := range specs {
		out[i] = w.Path
	}
	return out
}

// cachedGet serves a client's cached read from the shared cache (or the
// leader, into it), and records the client as a cacher of the value when
// it may cache it: no invalidation or fail-over came since the read began.
func (p *Proxy) cachedGet(ctx context.Context, t *cellTable, req api.ReadRequest) (api.GetResponse, error) {
	f, lead := t.joinFlight(req.Path)
	if lead {
		t.fly(p, f, req.Path)
	} else {
		select {
		case <-f.done:
		case <-ctx.Done():
			return api.GetResponse{}, api.Errorf(api.CodeUnavailable, "proxy: read of %s: %v", req.Path, ctx.Err())
		}
	}
	resp, hit, err, gen := f.resp, f.hit || !lead, f.err, f.gen
	if err != nil {
		return resp, err
	}
	if hit {
		p.m.cacheHits.Inc()
	} else {
		p.m.cacheMisses.Inc()
	}
	resp.Proxy = ""
	if !resp.Cacheable {
		return resp, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gen != gen || t.liveClientLocked(req.Session) == nil {
		resp.Cacheable = false
		return resp, nil
	}
	if t.cachers[req.Path] == nil {
		t.cachers[req.Path] = map[uint64]struct{}{}
	}
	t.cachers[req.Path][req.Session] = struct{}{}
	ps := t.sessions[req.Session]
	ps.cached[req.Path] = struct{}{}
	resp.Proxy = p.instance
	return resp, nil
}

// watchRead runs a client's watch-arming read on the proxy's session (one
// server-side watch per path and kind for all clients) and holds the
// watch for the client.
func (p *Proxy) watchRead(ctx context.Context, t *cellTable, route string, req api.ReadRequest) ([]byte, error) {
	client := req.Session
	body, index, w, err := p.up.SharedWatchRead(ctx, t.name, route, api.ReadRequest{Path: req.Path, Watch: req.Watch})
	if err != nil {
		return nil, err
	}
	p.hold(t, client, armKey{req.Path, req.Watch, index}, w)
	return body, nil
}

// rearm re-arms a client's watches (after it came to this proxy, or a
// fail-over) on the proxy's session, each as armed at its Since.
func (p *Proxy) rearm(ctx context.Context, t *cellTable, req api.WatchRequest) (api.WatchResponse, error) {
	t.mu.Lock()
	ps := t.liveClientLocked(req.Session)
	var specs []api.WatchSpec
	for _, sp := range req.Watches {
		// One already held at the same index fires as this one would.
		if ps == nil || ps.watches[armKey{sp.Path, sp.Kind, sp.Since}] == nil {
			specs = append(specs, sp)
		}
	}
	t.mu.Unlock()
	if len(specs) == 0 {
		return api.WatchResponse{}, nil
	}
	ws, index, err := p.up.SharedRearm(ctx, t.name, specs)
	if err != nil {
		return api.WatchResponse{}, err
	}
	for i, w := range ws {
		p.hold(t, req.Session, armKey{specs[i].Path, specs[i].Kind, specs[i].Since}, w)
	}
	return api.WatchResponse{Index: index}, nil
}

// hold keeps w for the client until it fires (then the client gets its
// event) or the client leaves this proxy.
func (p *Proxy) hold(t *cellTable, client uint64, key armKey, w *sdk.Watch) {
	t.mu.Lock()
	ps := t.liveClientLocked(client)
	dup := ps != nil && ps.watches[key] != nil
	if ps != nil && !dup {
		ps.watches[key] = w
		p.m.clientWatches.Inc()
	}
	t.mu.Unlock()
	if ps == nil || dup {
		w.Stop() // it left meanwhile; or one held already fires for it
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		select {
		case ev, ok := <-w.C:
			t.mu.Lock()
			delete(ps.watches, key)
			p.m.clientWatches.Dec()
			if ok && t.sessions[ps.id] == ps && ps.err == nil {
				if ev.Type == sdk.EventSessionExpired || ev.Type == sdk.EventSessionClosed {
					// The proxy's session ended, and its watches with it:
					// the client re-reads.
					ev = api.Event{Type: api.EventResync, Path: key.path, Kind: key.kind}
				}
				t.pushLocked(ps, ev)
			}
			t.mu.Unlock()
		case <-ps.gone:
			w.Stop()
			t.mu.Lock()
			delete(ps.watches, key)
			p.m.clientWatches.Dec()
			t.mu.Unlock()
		case <-p.ctx.Done():
		}
	}()
}
