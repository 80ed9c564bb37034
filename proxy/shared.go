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
	"errors"
	"strconv"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// gate is the proxy as its sdk client's AckGate: the shared session
// acknowledges an invalidation, or a new leader's epoch, only when the
// clients the proxy served cacheable values to have.
type gate struct{ p *Proxy }

func (g *gate) Invalidated(cell string, paths []string) <-chan struct{} {
	if t := g.p.existingTable(cell); t != nil {
		return t.invalidate(paths, mutant.On(mutant.SharedAck))
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
	// fair: the client's grant had at least api.FairCacheAck of its
	// window left when the invalidation was queued. Only a fair wait it
	// lets run out is held against it (a grant already over serves
	// nothing, and one a moment from its end left no time to answer),
	// as a leader judges its sessions' deadlines.
	fair bool
}

// fairWait reports whether a wait queued now for ps is fair (clientWait).
func fairWait(ps *proxySession, now time.Time) bool {
	if mutant.On(mutant.LapseUnfair) {
		return now.Before(ps.grantUntil)
	}
	return ps.grantUntil.Sub(now) >= api.FairCacheAck(api.CacheWindowFor(ps.leaseOrDefault()))
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
			waits = append(waits, clientWait{ps: ps, seq: seq, fair: fairWait(ps, time.Now())})
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
				lapsed := !gone && w.ps.pack < w.seq && !now.Before(w.ps.grantUntil)
				if lapsed {
					t.lapsedLocked(w) // once: the wait ends here
				}
				if gone || w.ps.pack >= w.seq || lapsed {
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
// whose KeepAlives do not come here, which is forwarded as it is. A
// request it answers is authenticated here (auth.go) and bounded
// (validate.go) first.
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
	var paths []string
	var session uint64
	var secret string
	var rreq api.ReadRequest
	var wreq api.WatchRequest
	if route == api.RouteWatch {
		if json.Unmarshal(rc.PostBody(), &wreq) != nil || wreq.Session == 0 {
			return false
		}
		if err := checkWatch(wreq); err != nil {
			reply(rc, nil, err)
			return true
		}
		paths, session, secret = watchPaths(wreq.Watches), wreq.Session, wreq.Secret
	} else {
		if json.Unmarshal(rc.PostBody(), &rreq) != nil || rreq.Session == 0 || (rreq.Watch == "" && !(rreq.Cache && route == api.RouteGet)) {
			return false
		}
		if err := checkRead(rreq); err != nil {
			reply(rc, nil, err)
			return true
		}
		paths, session, secret = []string{rreq.Path}, rreq.Session, rreq.Secret
	}
	cctx, cancel := p.requestContext(rc)
	defer cancel()
	who, err := p.authenticate(cctx, rc)
	if err == nil {
		err = need(who, api.RoleRead, paths...)
	}
	if err != nil {
		reply(rc, nil, err)
		return true
	}
	if !p.viewFresh() || !t.isLiveClient(session, secret) {
		return false
	}
	switch {
	case route == api.RouteWatch:
		resp, err := p.rearm(cctx, t, wreq)
		if errors.Is(err, errOwnSessionFull) {
			return false // the proxy's session is full: the client's own holds them
		}
		reply(rc, resp, err)
	case rreq.Watch != "":
		body, err := p.watchRead(cctx, t, route, rreq)
		if errors.Is(err, errOwnSessionFull) {
			return false
		}
		replyRaw(rc, body, err)
	default:
		resp, err := p.cachedGet(cctx, t, rreq)
		reply(rc, resp, err)
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
	return ps != nil && subtle.ConstantTimeCompare([]byte(ps.secret), []byte(secret)) == 1
}

func watchPaths(specs []api.WatchSpec) []string {
	out := make([]string, len(specs))
	for i, w := range specs {
		out[i] = w.Path
	}
	return out
}

// cacheBlocked: an invalidation (or a resync, which may stand for one) the
// proxy passed to the client is unacknowledged. Until it is, the client's
// grant to serve from cache is not extended and it is served uncached.
func (ps *proxySession) cacheBlocked() bool {
	for _, ev := range ps.pevents {
		if ev.Seq > ps.pack && (ev.Type == api.EventInvalidate || ev.Type == api.EventResync) {
			return true
		}
	}
	return false
}

// lapsedLocked counts a wait that ended with its client's grant,
// unacknowledged: against the client's tenant if the wait was fair and
// the client session was not counted before (a tenant's count is of
// sessions, as at the leader: one client that lets a fail-over's
// invalidation of all it cached run out is one).
func (t *cellTable) lapsedLocked(w clientWait) {
	held := w.fair && (!w.ps.lapsed || mutant.On(mutant.LapsePerWait))
	t.m.grantLapses.WithLabelValues(strconv.FormatBool(held)).Inc()
	if !held {
		return
	}
	w.ps.lapsed = true
	if t.lapses[w.ps.tenant]++; t.lapses[w.ps.tenant] == api.MaxCacheMissesPerTenant && w.ps.tenant != "" && t.log != nil {
		t.log.Warn("tenant's clients let cache grants run out unacknowledged: served uncached on this cell from now on",
			"cell", t.name, "tenant", w.ps.tenant, "clients", api.MaxCacheMissesPerTenant, "last_session", w.ps.id)
	}
}

// tenantLapsedLocked: api.MaxCacheMissesPerTenant of the tenant's clients
// let a grant run out with an invalidation unacknowledged ("" is no
// tenant: auth off, refused one session at a time).
func (t *cellTable) tenantLapsedLocked(tenant string) bool {
	return tenant != "" && t.lapses[tenant] >= api.MaxCacheMissesPerTenant && !mutant.On(mutant.TenantLapses)
}

// grantCap is the grant the client may have, given the proxy's own cache
// until: no later than the grant it has while it is cacheBlocked.
func (ps *proxySession) grantCap(until time.Time) time.Time {
	if ps.cacheBlocked() && until.After(ps.grantUntil) {
		return ps.grantUntil
	}
	return until
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
	resp.Proxy, resp.Shared = "", f.hit
	if !resp.Cacheable {
		return resp, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ps := t.liveClientLocked(req.Session); t.gen != gen || ps == nil || ps.cacheBlocked() || t.tenantLapsedLocked(ps.tenant) {
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
