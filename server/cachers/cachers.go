// Package cachers is the leader's list of which sessions cache which
// nodes. It is leader-only soft state beside the state machine (a new
// leader starts with none; its clients flush on the fail-over), and it
// decides nothing about time: the cell invalidates the sessions Begin
// returns and waits for them before it commits the change.
package cachers

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Table maps a node's path to the sessions that may hold it in their cache.
type Table struct {
	lim       Limits
	mu        sync.Mutex
	byPath    map[string]map[uint64]struct{}
	bySession map[uint64]map[string]struct{}
	// tenantOf is each registered session's tenant ("" none), perTenant
	// its tenants' entries (caps.go); refused are the sessions that may
	// cache no more under this leadership (Revoke).
	tenantOf  map[uint64]string
	perTenant map[string]int
	refused   map[uint64]struct{}
	// misses counts each tenant's sessions refused (Revoke).
	misses map[string]int
	counts Counts
	// busy counts the changes in flight per path (and busyUnder per
	// prefix, for a seal): a read of a busy path is served uncached, so
	// nobody caches a value about to change.
	busy      map[string]int
	busyUnder map[string]int
	// inflight are the sessions changes in flight are invalidating, per
	// path (counted: two changes may claim one session).
	inflight map[string]map[uint64]int
	// started records when each change in flight began (its id → time),
	// for the oldest-invalidation metric.
	started map[uint64]time.Time
	nextID  uint64
}

// New returns an empty table without caps.
func New() *Table { return NewWithLimits(Limits{}) }

// NewWithLimits returns an empty table with caps.
func NewWithLimits(lim Limits) *Table {
	t := &Table{lim: lim}
	t.Reset()
	return t
}

// Reset forgets every cacher and every refusal (leadership lost: a new
// leader starts afresh). Changes in flight keep their done funcs working.
func (t *Table) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byPath = map[string]map[uint64]struct{}{}
	t.bySession = map[uint64]map[string]struct{}{}
	t.tenantOf, t.perTenant, t.refused, t.misses = map[uint64]string{}, map[string]int{}, map[uint64]struct{}{}, map[string]int{}
	if t.busy == nil {
		t.busy, t.busyUnder, t.started = map[string]int{}, map[string]int{}, map[uint64]time.Time{}
		t.inflight = map[string]map[uint64]int{}
	}
}

// Register records session, of tenant ("" none), as a cacher of path.
// Anything but Registered means the read must be served uncached: a
// change of path is in flight, the session was refused (Revoke), or a
// cap is reached (caps.go).
func (t *Table) Register(path string, session uint64, tenant string) Outcome {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy[path] > 0 {
		return Busy
	}
	for p := path; p != "/" && p != ""; p = parent(p) {
		if t.busyUnder[p] > 0 {
			return Busy
		}
	}
	if o := t.admitLocked(path, session, tenant); o != Registered {
		return o
	}
	if _, ok := t.tenantOf[session]; !ok {
		t.tenantOf[session] = tenant
	}
	t.addLocked(path, session)
	return Registered
}

func (t *Table) addLocked(path string, session uint64) {
	if t.byPath[path] == nil {
		t.byPath[path] = map[uint64]struct{}{}
	}
	if _, ok := t.byPath[path][session]; ok {
		return
	}
	t.byPath[path][session] = struct{}{}
	if t.bySession[session] == nil {
		t.bySession[session] = map[string]struct{}{}
	}
	t.bySession[session][path] = struct{}{}
	t.countLocked(session, 1)
}

// Begin starts a change of path: from now until done, reads of it are
// not cacheable. It returns the sessions the change must invalidate, in id
// order: the path's cachers (forgotten here) and those another change of
// the path is still invalidating (a second change must not commit before
// the first one's cachers have acknowledged). done(acked) ends the
// change; acked false (the change gave up waiting) records its sessions
// as cachers again, so a later change invalidates them once more.
func (t *Table) Begin(path string, now time.Time) (sessions []uint64, done func(acked bool)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busy[path]++
	sessions = t.claimLocked(path)
	id := t.startLocked(now)
	return sorted(sessions), func(acked bool) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.busy[path]--; t.busy[path] <= 0 {
			delete(t.busy, path)
		}
		t.releaseLocked(path, sessions, acked)
		delete(t.started, id)
	}
}

// BeginUnder is Begin for every node at or under prefix (a seal). It
// returns the sessions with the paths each must invalidate.
func (t *Table) BeginUnder(prefix string, now time.Time) (cachers map[uint64][]string, done func(acked bool)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busyUnder[prefix]++
	under := func(p string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }
	var paths []string
	for p := range t.byPath {
		if under(p) {
			paths = append(paths, p)
		}
	}
	for p := range t.inflight {
		if under(p) && t.byPath[p] == nil {
			paths = append(paths, p)
		}
	}
	cachers = map[uint64][]string{}
	claimed := map[string][]uint64{}
	for _, p := range paths {
		claimed[p] = t.claimLocked(p)
		for _, s := range claimed[p] {
			cachers[s] = append(cachers[s], p)
		}
	}
	id := t.startLocked(now)
	return cachers, func(acked bool) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.busyUnder[prefix]--; t.busyUnder[prefix] <= 0 {
			delete(t.busyUnder, prefix)
		}
		for p, ss := range claimed {
			t.releaseLocked(p, ss, acked)
		}
		delete(t.started, id)
	}
}

// claimLocked takes path's cachers and adds those other changes of it are
// invalidating; all are in flight until released.
func (t *Table) claimLocked(path string) []uint64 {
	out := t.takeLocked(path)
	for s := range t.inflight[path] {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) > 0 && t.inflight[path] == nil {
		t.inflight[path] = map[uint64]int{}
	}
	for _, s := range out {
		t.inflight[path][s]++
	}
	return out
}

// releaseLocked ends a change's claim on sessions; not acked: they may
// still hold the old value, so they are cachers of path again.
func (t *Table) releaseLocked(path string, sessions []uint64, acked bool) {
	for _, s := range sessions {
		if m := t.inflight[path]; m != nil {
			if m[s]--; m[s] <= 0 {
				delete(m, s)
			}
			if len(m) == 0 {
				delete(t.inflight, path)
			}
		}
		if !acked {
			t.addLocked(path, s)
		}
	}
}

// Forget drops a session that ended.
func (t *Table) Forget(session uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for path := range t.bySession[session] {
		if m := t.byPath[path]; m != nil {
			delete(m, session)
			if len(m) == 0 {
				delete(t.byPath, path)
			}
		}
		t.countLocked(session, -1)
	}
	delete(t.bySession, session)
	delete(t.tenantOf, session)
	delete(t.refused, session)
}

// Stats reports the cached paths, the (path, session) entries and when the
// oldest change still waiting for its cachers began (zero if none).
func (t *Table) Stats() (paths, entries int, oldest time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range t.byPath {
		entries += len(m)
	}
	for _, at := range t.started {
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	return len(t.byPath), entries, oldest
}

func (t *Table) takeLocked(path string) []uint64 {
	m := t.byPath[path]
	delete(t.byPath, path)
	out := make([]uint64, 0, len(m))
	for s := range m {
		out = append(out, s)
		if ps := t.bySession[s]; ps != nil {
			delete(ps, path)
			t.countLocked(s, -1)
			if len(ps) == 0 {
				delete(t.bySession, s)
			}
		}
	}
	return out
}

func (t *Table) startLocked(now time.Time) uint64 {
	t.nextID++
	t.started[t.nextID] = now
	return t.nextID
}

func sorted(s []uint64) []uint64 {
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// parent of a clean absolute path ("/a/b" → "/a", "/a" → "/").
func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}
