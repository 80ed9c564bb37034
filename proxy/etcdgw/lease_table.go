package etcdgw

import (
	"context"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// The lease table (docs/etcd.md, "Lease"). A lease is a gateway-side
// record bound to the credential digest that granted it: the table is
// keyed by (digest, id), so one tenant can neither probe nor squat
// another's ids, and an id bound to another credential answers exactly
// as an unknown one. A lease holds one session per cell its keys live on,
// opened lazily on the first write with the lease there (LeaseMS = the
// lease's TTL), renewed only when the client sends a KeepAlive, closed on
// Revoke or by the reaper once the TTL has passed since the last
// KeepAlive (lease_reaper.go).

// leaseKey is a lease's key: the credential that granted it and its id.
type leaseKey struct {
	digest string
	id     int64
}

// sessionRef names a session: its cell and id.
type sessionRef struct {
	cell string
	id   uint64
}

// lease is one lease. Its fields are guarded by the table's mu; op
// serializes the lease's network work (opens, renewals, closes).
type lease struct {
	key leaseKey
	// token is the credential's API token: the reaper closes sessions
	// with it (the digest it was granted under is its hash).
	token    string
	ttl      int64     // granted, seconds
	lastKA   time.Time // the grant or the last KeepAlive received
	sessions map[string]*leaseSession
	// locks are the lock nodes Lock made with the lease, by the lock's
	// path (a second Lock of one name with one lease is the same
	// acquisition, as etcd's), at most maxLocksPerLease.
	locks map[string]string
	gone  bool // revoked, expired or lost: out of the table
	op    sync.Mutex
}

// leaseSession is a lease's session on one cell.
type leaseSession struct {
	ref    sessionRef
	secret string
	next   uint64    // the last request id handed out
	until  time.Time // how long the session is guaranteed at its cell
	// prefixes are the served prefixes the lease wrote on the cell (its
	// keys are read there), at most MaxLeasePrefixes.
	prefixes []string
}

// leaseTable is the gateway's leases.
type leaseTable struct {
	be  Backend
	tag uint16
	now func() time.Time

	mu        sync.Mutex
	leases    map[leaseKey]*lease
	perCred   map[string]int
	bySession map[sessionRef]int64
}

// newLeaseTable makes the gateway's table and starts its reaper (ended
// by the gateway's Close).
func newLeaseTable(g *Gateway) *leaseTable {
	t := makeLeaseTable(g.be, time.Now)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		t.reap(g.ctx)
	}()
	return t
}

// makeLeaseTable is a table without a reaper (tests drive it).
func makeLeaseTable(be Backend, now func() time.Time) *leaseTable {
	return &leaseTable{
		be: be, tag: leaseTag(be.Name()), now: now,
		leases: map[leaseKey]*lease{}, perCred: map[string]int{}, bySession: map[sessionRef]int64{},
	}
}

// lookup is the caller's live lease id: errLeaseNotFound if there is
// none for this credential (or it is past its TTL), a message naming
// where leases live if the id carries another gateway's tag.
func (t *leaseTable) lookup(w who, id int64) (*lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.leases[leaseKey{digestOf(w), id}]
	if l == nil && mutant.On(mutant.EtcdLeaseBinding) {
		l = t.anyCredentialLocked(id) // the table ignores the credential
	}
	if l == nil || l.gone || !t.now().Before(l.deadlineLocked()) {
		if foreignLease(id, t.tag) {
			return nil, errForeignLease(id)
		}
		return nil, errLeaseNotFound
	}
	if l.token == "" {
		l.token = w.token
	}
	return l, nil
}

// anyCredentialLocked is a lease of id under any credential (only the
// broken build looks).
func (t *leaseTable) anyCredentialLocked(id int64) *lease {
	for k, l := range t.leases {
		if k.id == id {
			return l
		}
	}
	return nil
}

// digestOf is the credential a lease is bound to.
func digestOf(w who) string {
	if w.caller == nil {
		return ""
	}
	return w.caller.Digest()
}

// deadlineLocked is when the lease ends without a KeepAlive: its TTL
// after the last one.
func (l *lease) deadlineLocked() time.Time {
	return l.lastKA.Add(time.Duration(l.ttl) * time.Second)
}

// untilLocked is how long the lease is guaranteed: its deadline, and no
// longer than any of its sessions is guaranteed at its cell.
func (l *lease) untilLocked() time.Time {
	u := l.deadlineLocked()
	for _, s := range l.sessions {
		if s.until.Before(u) {
			u = s.until
		}
	}
	return u
}

// session is the write header for a write with lease id on p's cell,
// opening the lease's session there on first use. LeaseNotFound if the
// lease is unknown or bound to another credential (never says which).
func (t *leaseTable) session(ctx context.Context, w who, id int64, p PrefixInfo) (api.WriteHeader, error) {
	l, err := t.lookup(w, id)
	if err != nil {
		return api.WriteHeader{}, err
	}
	if h, ok := t.nextRequest(l, p); ok {
		return h, nil
	}
	l.op.Lock()
	defer l.op.Unlock()
	if h, ok := t.nextRequest(l, p); ok {
		return h, nil // another write opened it meanwhile
	}
	if err := t.open(ctx, w, l, p); err != nil {
		return api.WriteHeader{}, err
	}
	if h, ok := t.nextRequest(l, p); ok {
		return h, nil
	}
	return api.WriteHeader{}, errLeaseNotFound // revoked while opening
}

// nextRequest is the header of the next write on the lease's session
// on p's cell, if it has one. Ack stays 0: the gateway does not learn
// when a write's reply reached its handler, and the cell forgets the
// oldest results past api.MaxSessionRequestWindow by itself.
func (t *leaseTable) nextRequest(l *lease, p PrefixInfo) (api.WriteHeader, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := l.sessions[p.Cell]
	if s == nil || l.gone {
		return api.WriteHeader{}, false
	}
	s.addPrefix(p.Prefix)
	s.next++
	return api.WriteHeader{Session: s.ref.id, Secret: s.secret, Request: s.next}, true
}

// addPrefix records a prefix the lease wrote on the session's cell.
func (s *leaseSession) addPrefix(prefix string) {
	for _, q := range s.prefixes {
		if q == prefix {
			return
		}
	}
	if len(s.prefixes) < MaxLeasePrefixes {
		s.prefixes = append(s.prefixes, prefix)
	}
}

// leaseOf is the lease whose session on cell is session (0: none).
func (t *leaseTable) leaseOf(cell string, session uint64) int64 {
	if session == 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bySession[sessionRef{cell, session}]
}

// dropLocked takes l out of the table.
func (t *leaseTable) dropLocked(l *lease) {
	if l.gone {
		return
	}
	l.gone = true
	if t.leases[l.key] == l {
		delete(t.leases, l.key)
		if t.perCred[l.key.digest]--; t.perCred[l.key.digest] <= 0 {
			delete(t.perCred, l.key.digest)
		}
	}
	for _, s := range l.sessions {
		delete(t.bySession, s.ref)
	}
}

// maxLocksPerLease bounds the lock nodes a lease remembers (lockNode);
// past it a Lock of a new name is not remembered (a second Lock of that
// name with the lease then queues a second node).
const maxLocksPerLease = 64

// lockNode is the lock node a Lock of name with the caller's lease id
// made ("" if none is remembered).
func (t *leaseTable) lockNode(w who, id int64, name string) string {
	l, err := t.lookup(w, id)
	if err != nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return l.locks[name]
}

// setLockNode remembers (node "": forgets) the lock node of name.
func (t *leaseTable) setLockNode(w who, id int64, name, node string) {
	l, err := t.lookup(w, id)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case node == "":
		delete(l.locks, name)
	case l.locks == nil:
		l.locks = map[string]string{name: node}
	case len(l.locks) < maxLocksPerLease:
		l.locks[name] = node
	}
}
