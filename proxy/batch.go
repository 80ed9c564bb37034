package proxy

// The pure part of KeepAlive batching: which sessions a batch carries and
// what a reply does to them. No clock (times are passed in), no I/O.

import (
	"slices"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// proxySession is one client session this proxy renews on its cell.
type proxySession struct {
	id uint64
	// lease is the session's lease length; 0 until the leader said.
	lease time.Duration
	// lastKA is when the client's latest KeepAlive (or its open) reached
	// the proxy: a batch extends the lease from then.
	lastKA time.Time
	// base is the lastKA of the latest batch the leader confirmed: the
	// cell's lease runs at least until base + lease. Zero: never confirmed
	// through this proxy.
	base time.Time
	// ack is the client's acknowledgement as it last sent it; sentAck the
	// one a confirmed batch carried.
	ack, sentAck ack
	// events are the leader's events for the session that its client has
	// not acknowledged, under the proxy's epoch, in seq order.
	events []api.Event
	// err ends the session (session_expired, no_session): every later
	// KeepAlive of it gets it.
	err *api.Error
	// urgent: the next urgent batch carries it (new to this proxy, or
	// an acknowledgement a write is waiting for).
	urgent bool
	// waiter is the client's KeepAlive held until something changes
	// (nil while a change woke it, until its next step); held is the
	// newest one not yet answered, woken or not.
	waiter *heldKA
	held   *heldKA

	// The proxy's own events for the client (shared.go): pevents are
	// those not yet acknowledged, pseq the last seq given, pack the
	// client's acknowledgement.
	pevents    []api.Event
	pseq, pack uint64
	// grantUntil bounds every grant to serve from cache this proxy gave
	// the client (each counts from the client's send, before the reply).
	grantUntil time.Time
	// lapsed: a grant of the client's ran out with an invalidation
	// unacknowledged, and it was counted against its tenant (once).
	lapsed bool
	// watches are the shared watches the client waits on (watches.go),
	// one per path and kind; cached the paths it served it as cacheable
	// (its entries in cellTable.cachers).
	watches map[watchKey]*sharedWatch
	cached  map[string]struct{}
	// knowsMe: the client's KeepAlive named this proxy instance.
	knowsMe bool
	// awaitBatch: its KeepAlive's wait is over and it waits for the batch
	// that carries it (so that its lease counts from its own send).
	awaitBatch bool
	// secret is the session's secret as the cell confirmed it (its open's
	// reply, or a KeepAlive the leader accepted): an entry exists only
	// for a session the leader confirmed.
	secret string
	// tenant is the tenant whose token opened or first renewed the
	// session here ("" with auth off or the proxy's own token): later
	// KeepAlives need a token of it, and once it holds no token the
	// proxy stops renewing the session.
	tenant string
	// gone is closed when the proxy forgets the session.
	gone chan struct{}
}

func newProxySession(id uint64) *proxySession {
	return &proxySession{id: id, watches: map[watchKey]*sharedWatch{}, cached: map[string]struct{}{}, gone: make(chan struct{})}
}

type ack struct{ epoch, seq uint64 }

// leaseOrDefault is the lease to judge the session by before the leader
// has named it.
func (ps *proxySession) leaseOrDefault() time.Duration {
	if ps.lease > 0 {
		return ps.lease
	}
	return api.DefaultLease
}

// seen is the highest seq the proxy holds for the session.
func (ps *proxySession) seen() uint64 {
	if n := len(ps.events); n > 0 {
		return ps.events[n-1].Seq
	}
	return 0
}

// pending are the events the client has not acknowledged.
func (ps *proxySession) pending(epoch uint64) []api.Event {
	if ps.ack.epoch != epoch {
		return ps.events
	}
	i := 0
	for i < len(ps.events) && ps.events[i].Seq <= ps.ack.seq {
		i++
	}
	return ps.events[i:]
}

// behind reports whether the client has yet to hear of leader epoch
// epoch (it acknowledged under an older one).
func (ps *proxySession) behind(epoch uint64) bool {
	return ps.ack.epoch != 0 && ps.ack.epoch < epoch
}

// clientAck records a client's acknowledgement and reports whether it is
// urgent: it covers an invalidation (a write waits for it), or it is the
// first under a new leader's epoch (after a fail-over the leader holds
// changes of cached nodes until caching clients acknowledge its epoch).
// Urgent acknowledgements go out at once.
func (ps *proxySession) clientAck(a ack, epoch uint64) (urgent bool) {
	if a == ps.ack {
		return false
	}
	urgent = a.epoch != ps.ack.epoch && a.epoch != 0
	if a.epoch == epoch {
		for _, ev := range ps.pending(epoch) {
			// A resync may stand for invalidations (capEvents): its ack is
			// urgent too.
			if ev.Seq <= a.seq && (ev.Type == api.EventInvalidate || ev.Type == api.EventResync) {
				urgent = true
			}
		}
	}
	ps.ack = a
	return urgent
}

// batchItem is a session as a batch carried it.
type batchItem struct {
	ps     *proxySession
	lastKA time.Time
	ack    ack
}

// batchKind is which sessions a batch carries.
type batchKind int

const (
	// fullBatch: every session, once a period (the renewal).
	fullBatch batchKind = iota
	// pollBatch: between full ones, the sessions with an acknowledgement
	// to pass on or new here (often none: it waits for the leader's
	// events of this proxy's sessions).
	pollBatch
	// urgentBatch: the sessions marked urgent, answered without a wait.
	urgentBatch
)

// saysSomething: the session's entry in a batch carries an ack entry.
func (ps *proxySession) saysSomething() bool {
	return ps.base.IsZero() || ps.lease == 0 || ps.ack != ps.sentAck
}

// errTenantGone ends a session whose tenant holds no token any more.
func errTenantGone(ps *proxySession) *api.Error {
	return api.Errorf(api.CodeUnauthorized, "session %d: tenant %s holds no API token (revoked or deleted)", ps.id, ps.tenant)
}

// buildBatch is the batch of kind for sessions at now: each session
// whose client was heard from within its lease and whose tenant is live
// (live nil: all are), with its age and, where there is something to
// say, its acknowledgement, the events held and whether it is new here.
// A session of a tenant gone is ended (its client told): it expires
// within a lease of its client's last KeepAlive.
func buildBatch(cell, proxy string, epoch uint64, sessions map[uint64]*proxySession, now time.Time, kind batchKind, wait time.Duration, live func(string) bool) (api.KeepAliveBatchRequest, []batchItem, []*proxySession) {
	req := api.KeepAliveBatchRequest{Cell: cell, Proxy: proxy, Epoch: epoch, WaitMS: wait.Milliseconds()}
	var items []batchItem
	var ended []*proxySession
	for _, ps := range sessions {
		switch {
		case ps.err != nil:
			continue
		case live != nil && !live(ps.tenant):
			ps.err = errTenantGone(ps)
			ended = append(ended, ps)
			continue
		case kind == urgentBatch && !ps.urgent:
			continue
		case kind == pollBatch && !ps.saysSomething():
			continue
		}
		age := now.Sub(ps.lastKA)
		if mutant.On(mutant.KeepDead) {
			age = 0
		}
		if age >= ps.leaseOrDefault() {
			continue // its client is gone (or elsewhere): let the lease run out
		}
		req.Sessions = append(req.Sessions, ps.id)
		req.AgeMS = append(req.AgeMS, max(age, 0).Milliseconds())
		req.Secrets = append(req.Secrets, ps.secret)
		isNew := ps.base.IsZero() || ps.lease == 0
		if ps.saysSomething() || len(ps.events) > 0 {
			req.Acks = append(req.Acks, api.BatchAck{Session: ps.id, AckEpoch: ps.ack.epoch, AckSeq: ps.ack.seq, Seen: ps.seen(), New: isNew})
		}
		items = append(items, batchItem{ps: ps, lastKA: ps.lastKA, ack: ps.ack})
		if kind == urgentBatch {
			ps.urgent = false
		}
	}
	return req, items, ended
}

// batchPart is one batch call: a request and the items it carries.
type batchPart struct {
	req   api.KeepAliveBatchRequest
	items []batchItem
}

// itemBytes bounds what one session adds to a batch's JSON body: its id,
// age and secret, and an ack entry.
func itemBytes(req *api.KeepAliveBatchRequest, i int, hasAck bool) int {
	n := 2*20 + 4 + 2*len(req.Secrets[i]) + 8 // id, age, quoted secret (escapes at most double hex), separators
	if hasAck {
		n += 160
	}
	return n
}

// splitBatch cuts a batch into parts of at most maxSessions sessions and
// about maxBytes of body each (always at least one part, so a poll with
// no sessions still goes).
func splitBatch(req api.KeepAliveBatchRequest, items []batchItem, maxSessions, maxBytes int) []batchPart {
	acks := make(map[uint64]api.BatchAck, len(req.Acks))
	for _, a := range req.Acks {
		acks[a.Session] = a
	}
	head := api.KeepAliveBatchRequest{Cell: req.Cell, Proxy: req.Proxy, Epoch: req.Epoch, WaitMS: req.WaitMS}
	parts := []batchPart{{req: head}}
	size := 256
	for i, id := range req.Sessions {
		a, hasAck := acks[id]
		n := itemBytes(&req, i, hasAck)
		cur := &parts[len(parts)-1]
		if len(cur.items) > 0 && (len(cur.items) >= maxSessions || size+n > maxBytes) && !mutant.On(mutant.BatchSplit) {
			parts = append(parts, batchPart{req: head})
			cur, size = &parts[len(parts)-1], 256
		}
		cur.req.Sessions = append(cur.req.Sessions, id)
		cur.req.AgeMS = append(cur.req.AgeMS, req.AgeMS[i])
		cur.req.Secrets = append(cur.req.Secrets, req.Secrets[i])
		if hasAck {
			cur.req.Acks = append(cur.req.Acks, a)
		}
		cur.items = append(cur.items, items[i])
		size += n
	}
	return parts
}

// halves splits a part in two (a batch the leader refused as a whole is
// sent again in halves, down to single sessions).
func (bp batchPart) halves() []batchPart {
	return splitBatch(bp.req, bp.items, (len(bp.items)+1)/2, 1<<62)
}

// applyReply applies a confirmed batch reply to its sessions and returns
// those whose held KeepAlive should answer now. *epoch is the proxy's
// epoch of the cell: a newer one drops the events held, which belonged to
// the old leadership (the client re-arms its watches on the new epoch).
// A session the reply refuses (expired, unknown, a secret the cell does
// not take) ends here; one refused as unavailable is not renewed and is
// tried again by the next batch; the others of the batch are renewed.
func applyReply(epoch *uint64, all map[uint64]*proxySession, items []batchItem, resp api.KeepAliveBatchResponse) (wake []*proxySession) {
	wake = adoptEpoch(epoch, all, resp.Epoch)
	wake = append(wake, renewItems(items, refusedIn(resp), resp.Epoch == *epoch)...)
	for _, r := range resp.Sessions {
		// A session of the batch, or one of this proxy's sessions the
		// batch did not carry that got events since the last batch; one
		// forgotten meanwhile (closed) is skipped.
		ps := all[r.Session]
		if ps != nil && applySessionReply(ps, r, *epoch, resp.Epoch == *epoch) {
			wake = append(wake, ps)
		}
	}
	return wake
}

// adoptEpoch moves *epoch to a reply's newer leader epoch, dropping every
// session's events, and returns the sessions to wake (all of them then).
func adoptEpoch(epoch *uint64, all map[uint64]*proxySession, replyEpoch uint64) (wake []*proxySession) {
	if replyEpoch > *epoch {
		// A new leader: every held KeepAlive answers now, so its client
		// learns of the fail-over (it flushes its cache and re-arms its
		// watches) and acknowledges the epoch, which the new leader's
		// cache fence waits for.
		*epoch = replyEpoch
		for _, ps := range all {
			ps.events = nil
			wake = append(wake, ps)
		}
	}
	return wake
}

// refusedIn is the sessions a reply refuses, for any reason.
func refusedIn(resp api.KeepAliveBatchResponse) map[uint64]bool {
	// Only an item the leader renewed moves its lease base: one the reply
	// refuses for any reason (unavailable while its expiry is in flight,
	// not yet known to a new leader, ended, a wrong secret) keeps it, so
	// its client is told the age of the lease the cell really has.
	refused := map[uint64]bool{}
	for _, r := range resp.Sessions {
		if r.Error != nil && (!mutant.On(mutant.RenewOnError) || r.Error.Code == api.CodeUnauthorized) {
			refused[r.Session] = true
		}
	}
	return refused
}

// renewItems moves the lease base of each item the leader renewed (not
// refused) to the KeepAlive the batch carried for it, and records the
// acknowledgement it carried as sent if the reply is of the current
// epoch. It returns the sessions to wake: those confirmed here for the
// first time, and those whose KeepAlive waits for this batch.
func renewItems(items []batchItem, refused map[uint64]bool, currentEpoch bool) (wake []*proxySession) {
	for _, it := range items {
		ps := it.ps
		if refused[ps.id] {
			continue // not renewed: the error below says why
		}
		first := ps.base.IsZero()
		advanced := it.lastKA.After(ps.base)
		if advanced {
			ps.base = it.lastKA
		}
		if advanced && ps.awaitBatch {
			wake = append(wake, ps) // its KeepAlive waits for this batch
		}
		if currentEpoch {
			ps.sentAck = it.ack
		}
		if first {
			wake = append(wake, ps)
		}
	}
	return wake
}

// applySessionReply applies a reply's part for one session under the
// proxy's epoch: an error that ends the session, the lease, and (from the
// current leadership only) the new events, less what the client has
// acknowledged. It reports whether the session's held KeepAlive should
// answer now.
func applySessionReply(ps *proxySession, r api.BatchSession, epoch uint64, currentEpoch bool) (wake bool) {
	if r.Error != nil {
		switch r.Error.Code {
		case api.CodeSessionExpired, api.CodeNoSession, api.CodeUnauthorized, api.CodeBadRequest:
			ps.err = r.Error
			return true
		}
		return false // unavailable: the next batch tries again
	}
	if r.LeaseMS > 0 {
		ps.lease = time.Duration(r.LeaseMS) * time.Millisecond
	}
	if !currentEpoch {
		return false // events of an older leadership
	}
	seen := ps.seen()
	for _, ev := range r.Events {
		if ev.Seq > seen {
			ps.events = append(ps.events, ev)
			seen = ev.Seq
		}
	}
	// Drop what the client has acknowledged.
	ps.events = capEvents(slices.Clone(ps.pending(epoch)))
	return len(ps.events) > 0
}

// capEvents bounds a session's leader events held for its client to
// api.MaxPendingEvents, as the leader bounds its own queue: past it, one
// resync at the newest Seq replaces them (the client flushes its cache and
// re-reads what it watches; acknowledging it acknowledges them all).
// Without it a client that never acknowledges, while the leader keeps
// replacing its queue with resyncs, would grow the list without end.
func capEvents(evs []api.Event) []api.Event {
	if len(evs) <= api.MaxPendingEvents || mutant.On(mutant.ProxyEventCap) {
		return evs
	}
	last := evs[len(evs)-1]
	return []api.Event{{Type: api.EventResync, Index: last.Index, Seq: last.Seq}}
}
