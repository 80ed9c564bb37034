package sdk

import (
	"slices"

	"github.com/lockservice/lockd/api"
)

// watchKey names a server-side watch: one path, one kind.
type watchKey struct {
	path string
	kind api.WatchKind
}

// watch is one caller's one-shot watch: it receives exactly one event,
// then its channel is closed.
type watch struct {
	key watchKey
	arm uint64 // cell index of the read that armed it
	ch  chan api.Event
}

func (w *watch) fire(ev api.Event) {
	w.ch <- ev // cap 1 and fired once: never blocks
	close(w.ch)
}

// matches reports whether ev fires w. An event at or below the index w was
// armed at is older than w's read (it fired an earlier arming), so w stays
// armed; an index of 0 on either side disables the check.
func (w *watch) matches(ev api.Event) bool {
	if ev.Type == api.EventResync {
		return true
	}
	if ev.Path != w.key.path || (ev.Kind != "" && ev.Kind != w.key.kind) {
		return false
	}
	return ev.Index == 0 || w.arm == 0 || ev.Index > w.arm
}

// maxOrphans bounds the events kept for reads in flight; past it they are
// replaced by one resync, which fires every watch those reads arm.
const maxOrphans = api.MaxPendingEvents

// watchSet is a session's armed watches. It is guarded by the session's
// mutex.
//
// A watch is armed on the cell by a read (get/children/lock state with a
// watch), and its event may arrive in a KeepAlive reply before that read's
// own reply. So while any such read is in flight (pending > 0), events are
// also kept as orphans, and a watch registered when its read returns first
// looks among them (for one newer than its read).
//
// The cell re-sends a session's events in every KeepAlive reply until a
// later KeepAlive acknowledges them (their reply may have been lost), so
// dispatch processes each event once, by its seq: seqs grow within one
// leader epoch and restart with the next.
type watchSet struct {
	byKey   map[watchKey][]*watch
	dirty   map[watchKey]struct{} // to re-register with /v1/watch
	pending int
	orphans []api.Event
	// seqEpoch is the leader epoch of the last reply; seq the highest
	// event seq processed under it (what the next KeepAlive acknowledges).
	seqEpoch, seq uint64
	// pseq is the highest proxy event seq processed from the proxy
	// instance the session's KeepAlives go through.
	pseq uint64
	// holds are invalidations processed but not yet to be acknowledged
	// (Config.Gate), in seq order; epochHold holds back the
	// acknowledgement of the current epoch while open.
	holds     []ackHold
	epochHold <-chan struct{}
}

// ackHold: acknowledge nothing from seq on until ch is closed.
type ackHold struct {
	seq uint64
	ch  <-chan struct{}
}

// hold holds back the acknowledgement of seq and later until ch closes.
func (ws *watchSet) hold(seq uint64, ch <-chan struct{}) {
	ws.holds = append(ws.holds, ackHold{seq, ch})
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// held reports whether some acknowledgement is held back.
func (ws *watchSet) held() bool {
	ws.releaseHolds()
	return len(ws.holds) > 0 || ws.epochHold != nil
}

func (ws *watchSet) releaseHolds() {
	for len(ws.holds) > 0 && closed(ws.holds[0].ch) {
		ws.holds = ws.holds[1:]
	}
	if ws.epochHold != nil && closed(ws.epochHold) {
		ws.epochHold = nil
	}
}

func (ws *watchSet) init() {
	ws.byKey = make(map[watchKey][]*watch)
	ws.dirty = make(map[watchKey]struct{})
}

// ack is what the next KeepAlive acknowledges: events up to seq under
// leader epoch epoch.
// An epoch held back is acknowledged as epoch 0, which no leader takes.
func (ws *watchSet) ack() (epoch, seq uint64) {
	ws.releaseHolds()
	if ws.epochHold != nil {
		return 0, 0
	}
	seq = ws.seq
	if len(ws.holds) > 0 {
		seq = min(seq, ws.holds[0].seq-1)
	}
	return ws.seqEpoch, seq
}

// fresh reports whether ev is new to the session, and records it as
// processed. An event without a seq (an older cell) is always new.
func (ws *watchSet) fresh(ev api.Event) bool {
	if ev.Seq == 0 {
		return true
	}
	if ev.Seq <= ws.seq {
		return false
	}
	ws.seq = ev.Seq
	return true
}

// dispatch fires the watches the events of a KeepAlive reply from leader
// epoch epoch match, skipping events already processed. It reports
// whether some keys are left with watches whose server-side watch an event
// may have consumed, so they need re-registering; the paths the cell
// invalidated in the session's cache; and whether a resync came (it may
// have replaced invalidations).
// firstInv is the seq of the first invalidation (or resync, which may
// have replaced invalidations) among them.
func (ws *watchSet) dispatch(epoch uint64, events []api.Event) (rearm bool, invalidated []string, firstInv uint64, resync bool) {
	if epoch != 0 && epoch != ws.seqEpoch {
		ws.seqEpoch, ws.seq = epoch, 0 // a new leadership numbers afresh
		ws.holds = nil                 // the old one's holds: it is gone
	}
	return ws.process(events, ws.fresh)
}

// dispatchProxy is dispatch for the events of the proxy the session's
// KeepAlives go through (numbered by the proxy).
func (ws *watchSet) dispatchProxy(events []api.Event) (rearm bool, invalidated []string, resync bool) {
	rearm, invalidated, _, resync = ws.process(events, func(ev api.Event) bool {
		if ev.Seq <= ws.pseq {
			return false
		}
		ws.pseq = ev.Seq
		return true
	})
	return rearm, invalidated, resync
}

func (ws *watchSet) process(events []api.Event, fresh func(api.Event) bool) (rearm bool, invalidated []string, firstInv uint64, resync bool) {
	for _, ev := range events {
		if !fresh(ev) {
			continue
		}
		if ev.Type == api.EventInvalidate {
			invalidated = append(invalidated, ev.Path) // for the cache, not a watch
			if firstInv == 0 {
				firstInv = ev.Seq
			}
			continue
		}
		if ev.Type == api.EventResync {
			ws.failAll(api.EventResync)
			ws.orphan(ev)
			resync = true
			if firstInv == 0 {
				firstInv = ev.Seq // it may stand for invalidations
			}
			continue
		}
		if ws.firePath(ev) {
			rearm = true
		}
		// Kept even if it fired other watches: a read in flight may have
		// armed the same server-side watch, which this event consumed.
		ws.orphan(ev)
	}
	return rearm, invalidated, firstInv, resync
}

// ownDelete fires the session's watches on a node it deleted itself: the
// cell consumes them without an event (the reply tells this client), so
// the SDK delivers the deleted event locally, at the delete's index. If
// the delete's outcome is unknown the watchers are told to re-read.
func (ws *watchSet) ownDelete(path string, index uint64, applied bool) (rearm bool) {
	ev := api.Event{Type: api.EventDeleted, Path: path, Index: index}
	if !applied {
		ev = api.Event{Type: api.EventResync, Path: path}
	}
	rearm = ws.firePath(ev)
	if applied {
		ws.orphan(ev) // a read in flight may have armed the watch the delete consumed
	}
	return rearm
}

// firePath fires the watches on ev's path (of ev's kind, or both kinds if
// it names none) that ev matches. It reports whether some watches on a key
// were kept while others fired, so the key needs re-registering.
func (ws *watchSet) firePath(ev api.Event) (rearm bool) {
	for _, kind := range [...]api.WatchKind{api.WatchData, api.WatchChildren} {
		if ev.Kind != "" && ev.Kind != kind {
			continue
		}
		key := watchKey{ev.Path, kind}
		list := ws.byKey[key]
		if len(list) == 0 {
			continue
		}
		keep := list[:0]
		fired := false
		for _, w := range list {
			if w.matches(ev) {
				w.fire(ev)
				fired = true
			} else {
				keep = append(keep, w)
			}
		}
		clear(list[len(keep):])
		switch {
		case len(keep) == 0:
			delete(ws.byKey, key)
			delete(ws.dirty, key)
		case fired:
			ws.byKey[key] = keep
			ws.dirty[key] = struct{}{}
			rearm = true
		}
	}
	return rearm
}

// orphan keeps an event for the reads in flight, if any.
func (ws *watchSet) orphan(ev api.Event) {
	if ws.pending == 0 {
		return
	}
	if len(ws.orphans) >= maxOrphans {
		ws.orphans = append(ws.orphans[:0], api.Event{Type: api.EventResync})
		return
	}
	ws.orphans = append(ws.orphans, ev)
}

// beginRead notes a watch-arming read in flight.
func (ws *watchSet) beginRead() { ws.pending++ }

// finishRead ends a read begun with beginRead. If ok, it registers a
// watch on key armed at index arm and returns its channel; the watch fires
// at once if an orphan matches. dirty says the session failed over while
// the read was in flight, so the cell that armed it may be gone.
func (ws *watchSet) finishRead(key watchKey, arm uint64, ok, dirty bool) (<-chan api.Event, bool) {
	ws.pending--
	var ch chan api.Event
	rearm := false
	if ok {
		w := &watch{key: key, arm: arm, ch: make(chan api.Event, 1)}
		ch = w.ch
		fired := false
		for _, ev := range ws.orphans {
			if w.matches(ev) {
				if ev.Type == api.EventResync {
					ev.Path, ev.Kind = key.path, key.kind
				}
				w.fire(ev)
				fired = true
				break
			}
		}
		if !fired {
			ws.byKey[key] = append(ws.byKey[key], w)
			if dirty {
				ws.dirty[key] = struct{}{}
				rearm = true
			}
		}
	}
	if ws.pending == 0 {
		ws.orphans = nil
	}
	return ch, rearm
}

// failAll fires every watch with an event of type t and forgets them.
func (ws *watchSet) failAll(t api.EventType) {
	for key, list := range ws.byKey {
		for _, w := range list {
			w.fire(api.Event{Type: t, Path: key.path, Kind: key.kind})
		}
	}
	clear(ws.byKey)
	clear(ws.dirty)
}

// drop forgets the watch whose channel is ch, if it has not fired: its
// holder stopped waiting for it (it re-read instead).
func (ws *watchSet) drop(ch <-chan api.Event) {
	for key, list := range ws.byKey {
		for i, w := range list {
			if (<-chan api.Event)(w.ch) != ch {
				continue
			}
			list = slices.Delete(list, i, i+1)
			if len(list) == 0 {
				delete(ws.byKey, key)
				delete(ws.dirty, key)
			} else {
				ws.byKey[key] = list
			}
			return
		}
	}
}

// dropWatch forgets a watch of the session its holder no longer waits on.
func (s *Session) dropWatch(ch <-chan api.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.drop(ch)
}

// markAllDirty marks every key for re-registration; it reports whether any.
func (ws *watchSet) markAllDirty() bool {
	for key := range ws.byKey {
		ws.dirty[key] = struct{}{}
	}
	return len(ws.byKey) > 0
}

// takeDirty returns one spec per dirty key, Since being the lowest index
// any of its watches was armed at, and clears the dirty set.
func (ws *watchSet) takeDirty() []api.WatchSpec {
	specs := make([]api.WatchSpec, 0, len(ws.dirty))
	for key := range ws.dirty {
		list := ws.byKey[key]
		if len(list) == 0 {
			continue
		}
		since := list[0].arm
		for _, w := range list[1:] {
			since = min(since, w.arm)
		}
		specs = append(specs, api.WatchSpec{Path: key.path, Kind: key.kind, Since: since})
	}
	clear(ws.dirty)
	return specs
}

// resyncSpecs fires the watches behind specs the cell refused to
// re-register with a resync event: their holders must re-read.
func (ws *watchSet) resyncSpecs(specs []api.WatchSpec) {
	for _, sp := range specs {
		key := watchKey{sp.Path, sp.Kind}
		for _, w := range ws.byKey[key] {
			w.fire(api.Event{Type: api.EventResync, Path: key.path, Kind: key.kind})
		}
		delete(ws.byKey, key)
		delete(ws.dirty, key)
	}
}
