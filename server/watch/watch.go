// Package watch is the leader's table of one-shot watches. It is soft state
// beside the state machine: it lives only on the replica that leads, is
// emptied when leadership is lost, and is rebuilt by clients re-registering
// with the last index they saw.
package watch

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// Sink receives fired events for delivery on a session.
type Sink interface {
	Deliver(session uint64, ev api.Event)
}

type key struct {
	path string
	kind api.WatchKind
}

// Table maps (path, kind) to the sessions watching it. Each watch fires once.
type Table struct {
	mu        sync.Mutex
	sink      Sink
	watchers  map[key]map[uint64]struct{}
	bySession map[uint64]map[key]struct{}
	// tenantOf is the tenant of each session with watches armed ("" not
	// kept), byTenant how many watches each tenant has armed: a tenant's
	// watch quota holds across all its sessions.
	tenantOf map[uint64]string
	byTenant map[string]int
	fired    uint64 // events delivered, for metrics
}

// NewTable returns an empty table delivering to sink.
func NewTable(sink Sink) *Table {
	t := &Table{sink: sink}
	t.Reset()
	return t
}

// Register arms a watch of session, which tenant opened ("" for none).
// Registering the same (session, path, kind) twice is one watch.
func (t *Table) Register(session uint64, tenant, path string, kind api.WatchKind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key{path, kind}
	ws := t.watchers[k]
	if ws == nil {
		ws = map[uint64]struct{}{}
		t.watchers[k] = ws
	}
	ws[session] = struct{}{}
	ks := t.bySession[session]
	if ks == nil {
		ks = map[key]struct{}{}
		t.bySession[session] = ks
	}
	if _, had := ks[k]; !had && tenant != "" {
		t.tenantOf[session] = tenant
		t.byTenant[tenant]++
	}
	ks[k] = struct{}{}
}

// Armed is how many watches session has armed.
func (t *Table) Armed(session uint64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.bySession[session])
}

// Watching lists the watches session has armed (Since unset), sorted by
// path, then kind: what the fake cell (tests/fake) shows its tests.
func (t *Table) Watching(session uint64) []api.WatchSpec {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]api.WatchSpec, 0, len(t.bySession[session]))
	for k := range t.bySession[session] {
		out = append(out, api.WatchSpec{Path: k.path, Kind: k.kind})
	}
	slices.SortFunc(out, func(a, b api.WatchSpec) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}

// ArmedByTenant is how many watches tenant's sessions have armed.
func (t *Table) ArmedByTenant(tenant string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byTenant[tenant]
}

// forgetLocked drops n of session's watches from its tenant's count,
// and the session's tenant once it has none left.
func (t *Table) forgetLocked(session uint64, n int) {
	tenant, ok := t.tenantOf[session]
	if !ok {
		return
	}
	if t.byTenant[tenant] -= n; t.byTenant[tenant] <= 0 {
		delete(t.byTenant, tenant)
	}
	if len(t.bySession[session]) == 0 {
		delete(t.tenantOf, session)
	}
}

// FireNow delivers an event for a watch that must fire at registration (the
// node changed after the client's last seen index).
func (t *Table) FireNow(session uint64, ev api.Event) {
	t.mu.Lock()
	t.fired++
	t.mu.Unlock()
	t.sink.Deliver(session, ev)
}

// Apply fires every watch the changes of one committed entry trigger and
// returns how many events it delivered. by is the session whose delete made
// the changes (0 for none): its own watches on the node it deleted are
// consumed without an event, since the client knows of its delete from the
// reply (a lock release then costs one event, the next waiter's, not two).
func (t *Table) Apply(changes []fsm.Change, by uint64) int {
	if len(changes) == 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.watchers) == 0 {
		return 0
	}
	n := 0
	for _, c := range changes {
		switch c.Type {
		case fsm.ChangeCreated:
			n += t.fire(c.Path, api.WatchData, api.EventCreated, c.Index)
		case fsm.ChangeData:
			n += t.fire(c.Path, api.WatchData, api.EventDataChanged, c.Index)
		case fsm.ChangeDeleted:
			n += t.fireExcept(c.Path, api.WatchData, api.EventDeleted, c.Index, by)
			n += t.fireExcept(c.Path, api.WatchChildren, api.EventDeleted, c.Index, by)
		case fsm.ChangeChildren:
			n += t.fire(c.Path, api.WatchChildren, api.EventChildrenChanged, c.Index)
		case fsm.ChangeLockDelayEnded:
			n += t.fire(c.Path, api.WatchData, api.EventLockDelayEnded, c.Index)
		case fsm.ChangeMoved:
			var under []key
			for k := range t.watchers {
				if k.path == c.Path || strings.HasPrefix(k.path, c.Path+"/") {
					under = append(under, k)
				}
			}
			for _, k := range under {
				n += t.fire(k.path, k.kind, api.EventResync, c.Index)
			}
		}
	}
	t.fired += uint64(n)
	return n
}

func (t *Table) fire(path string, kind api.WatchKind, typ api.EventType, index uint64) int {
	return t.fireExcept(path, kind, typ, index, 0)
}

// fireExcept fires and removes every watch on (path, kind), delivering to
// every session but skip.
func (t *Table) fireExcept(path string, kind api.WatchKind, typ api.EventType, index, skip uint64) int {
	k := key{path, kind}
	ws := t.watchers[k]
	if len(ws) == 0 {
		return 0
	}
	delete(t.watchers, k)
	ev := api.Event{Type: typ, Path: path, Kind: kind, Index: index}
	n := 0
	for s := range ws {
		delete(t.bySession[s], k)
		if len(t.bySession[s]) == 0 {
			delete(t.bySession, s)
		}
		t.forgetLocked(s, 1)
		if s == skip && s != 0 {
			continue
		}
		t.sink.Deliver(s, ev)
		n++
	}
	return n
}

// DropSession forgets every watch of an ended session.
func (t *Table) DropSession(session uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.bySession[session])
	for k := range t.bySession[session] {
		ws := t.watchers[k]
		delete(ws, session)
		if len(ws) == 0 {
			delete(t.watchers, k)
		}
	}
	delete(t.bySession, session)
	t.forgetLocked(session, n)
}

// Reset forgets every watch (leadership lost).
func (t *Table) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watchers = map[key]map[uint64]struct{}{}
	t.bySession = map[uint64]map[key]struct{}{}
	t.tenantOf, t.byTenant = map[uint64]string{}, map[string]int{}
}

// Stats returns the number of armed watches and events delivered so far.
func (t *Table) Stats() (armed int, fired uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ws := range t.watchers {
		armed += len(ws)
	}
	return armed, t.fired
}
