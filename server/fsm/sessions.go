package fsm

import (
	"crypto/subtle"
	"sort"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// MaxEndedSessions is how many ended session ids the state remembers, so that
// a request naming a recently ended session gets session_expired rather than
// no_session.
const MaxEndedSessions = 16384

type requestResult struct {
	id     uint64
	result []byte
}

type session struct {
	id      uint64
	leaseMS int64
	// ackedBelow: the client has its reply for every id below it; results
	// for those ids are forgotten and a request with such an id is stale.
	ackedBelow uint64
	results    []requestResult // sorted by id, at most api.MaxSessionRequestWindow
	// ephemerals are its ephemeral nodes' paths (nil while it has none:
	// most sessions of a big cell hold none).
	ephemerals map[string]struct{}
	// confirmedEpoch is the last leader epoch under which the session
	// renewed (or was opened); silentMS is the recorded length of the
	// leaderships since then, a lower bound on the time since its last
	// acknowledged KeepAlive.
	confirmedEpoch uint64
	silentMS       int64
	caches         bool // its client caches reads (cache_session)
	// cached are the nodes the leaders of cachedEpoch granted it to cache
	// (cachepaths.go; State.cachedBy indexes them by path).
	cached      map[string]struct{}
	cachedEpoch uint64
	// secret must accompany every request naming the session; tenant is
	// the tenant that opened it ("" with auth off).
	secret string
	tenant string
	// maxWatches is its tenant's watch quota when it opened (0: none).
	maxWatches int
}

type openNonce struct {
	nonce   string
	session uint64
}

// authSession returns the live session a command names, once the
// command carries its secret. A wrong secret is refused before the
// session's dedupe window is read, so a guessed id learns nothing and
// changes nothing.
func (s *State) authSession(c *Command) (*session, *api.Error) {
	sess, err := s.liveSession(c.Session)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(sess.secret), []byte(c.Secret)) != 1 && !mutant.On(mutant.Secret) {
		return nil, api.Errorf(api.CodeUnauthorized, "wrong secret for session %d", c.Session)
	}
	return sess, nil
}

// CheckSecret answers, for the leader's KeepAlives and watches, whether
// secret is session id's: nil if it is or the session is not live (the
// caller reports that its own way), unauthorized if not.
func (s *State) CheckSecret(id uint64, secret string) *api.Error {
	sess, ok := s.sessions[id]
	if !ok || subtle.ConstantTimeCompare([]byte(sess.secret), []byte(secret)) == 1 || mutant.On(mutant.Secret) {
		return nil
	}
	return api.Errorf(api.CodeUnauthorized, "wrong secret for session %d", id)
}

func clampLease(ms int64) int64 {
	switch {
	case ms <= 0:
		return api.DefaultLease.Milliseconds()
	case ms < api.MinLease.Milliseconds():
		return api.MinLease.Milliseconds()
	case ms > api.MaxLease.Milliseconds():
		return api.MaxLease.Milliseconds()
	}
	return ms
}

func (s *State) openSession(index uint64, c *Command) Result {
	if len(c.Nonce) > api.MaxNonceLen {
		return Result{Err: api.Errorf(api.CodeBadRequest, "nonce is %d bytes, limit %d", len(c.Nonce), api.MaxNonceLen)}
	}
	key := openKey(c.Tenant, c.Nonce)
	if id, ok := s.opens[key]; ok && c.Nonce != "" {
		// A retry of an open that applied (its reply was lost): the same
		// session, and nothing changes. Once that session has ended the
		// retry opens a new one: the first never reached its client.
		if sess, live := s.sessions[id]; live {
			return Result{Session: id, Secret: sess.secret, LeaseMS: sess.leaseMS, Epoch: s.epoch}
		}
	}
	if len(s.sessions) >= s.limits.sessions {
		return Result{Err: api.Errorf(api.CodeLimitExceeded, "the cell has %d sessions, limit %d (MaxSessionsPerCell)", len(s.sessions), s.limits.sessions)}
	}
	if err := s.checkQuota(c, 1, 0, 0); err != nil {
		return Result{Err: err}
	}
	if len(c.Secret) > api.MaxSecretLen {
		return Result{Err: api.Errorf(api.CodeBadRequest, "session secret is %d bytes, limit %d", len(c.Secret), api.MaxSecretLen)}
	}
	// The session id is the index of its open entry: unique, deterministic.
	sess := &session{id: index, leaseMS: clampLease(c.LeaseMS), confirmedEpoch: s.epoch,
		secret: c.Secret, tenant: c.Tenant}
	if c.Tenant != "" && c.Quota != nil {
		sess.maxWatches = c.Quota.Effective().Watches
	}
	s.sessions[index] = sess
	s.use(sess.tenant, 1, 0, 0)
	if c.Nonce != "" {
		s.rememberOpen(key, index)
	}
	return Result{Session: index, Secret: sess.secret, LeaseMS: sess.leaseMS, Epoch: s.epoch}
}

// openKey is what a session open's nonce is remembered by: the nonce
// within its tenant's opens. Another tenant replaying a nonce it saw
// opens a session of its own; it never gets the first one's id and secret.
func openKey(tenant, nonce string) string {
	if tenant == "" || mutant.On(mutant.NonceKey) {
		return nonce
	}
	return tenant + "\x00" + nonce
}

// rememberOpen records an open's nonce, forgetting the oldest beyond the
// window. A nonce reused after its session ended appears twice in
// openOrder; the map follows the newer entry, which is evicted last.
func (s *State) rememberOpen(nonce string, id uint64) {
	s.opens[nonce] = id
	s.openOrder = append(s.openOrder, openNonce{nonce: nonce, session: id})
	if len(s.openOrder) > api.MaxOpenNonces {
		old := s.openOrder[0]
		if s.opens[old.nonce] == old.session {
			delete(s.opens, old.nonce)
		}
		s.openOrder = s.openOrder[1:]
	}
}

func (s *State) liveSession(id uint64) (*session, *api.Error) {
	if sess, ok := s.sessions[id]; ok {
		return sess, nil
	}
	if _, ok := s.ended[id]; ok {
		return nil, api.Errorf(api.CodeSessionExpired, "session %d has ended", id)
	}
	return nil, api.Errorf(api.CodeNoSession, "no session %d", id)
}

func (s *State) closeSession(index uint64, c *Command) (Result, []Change) {
	if _, ok := s.ended[c.Session]; ok {
		return Result{Session: c.Session}, nil // closing twice is not an error
	}
	if _, err := s.authSession(c); err != nil {
		return Result{Err: err}, nil
	}
	return Result{Session: c.Session}, s.endSession(index, c.Session, c.AtMS)
}

func (s *State) expireSession(index uint64, c *Command) (Result, []Change) {
	// A deposed leader's late expiry must never free a live session: the
	// expiry is valid only under the leadership that decided it.
	if c.Epoch != s.epoch {
		return Result{Err: api.Errorf(api.CodeNotLeader, "expiry decided under leader epoch %d, now %d", c.Epoch, s.epoch)}, nil
	}
	if _, err := s.liveSession(c.Target); err != nil {
		return Result{Err: err}, nil
	}
	return Result{Session: c.Target}, s.endSession(index, c.Target, c.AtMS)
}

// leaderStart bumps the leader epoch. Every session that did not renew under
// the leadership now ending is charged that leadership's length: a new
// leader grants it only what is left of its lease. The length is the larger
// of two lower bounds: the leader's committed ticks, and PrevLeadershipMS,
// the time the proposing replica measured from its own apply of the
// leader_start that began the ending leadership (Epoch names it; a
// measurement of another leadership is ignored). The second one also covers
// leaderships shorter than a tick and the election gap after them.
//
// A copy of the running leadership's own leader_start (a retry after a
// timed-out proposal that committed anyway) changes nothing, and a
// leader_start from an older term is refused: only a new Raft term starts a
// new leadership.
//
// The first leader_start after a restore also applies the restore plan it
// carries (restore.go): the prefixes the directory gives the cell, and a
// leader epoch above every one the cell had before.
func (s *State) leaderStart(index uint64, c *Command) (Result, []Change) {
	if s.epoch > 0 && c.Term <= s.leaderTerm {
		if c.Term == s.leaderTerm && c.ReplicaID == s.leaderID {
			return Result{Epoch: s.epoch}, nil
		}
		return Result{Err: api.Errorf(api.CodeNotLeader, "leader_start of replica %d term %d after term %d", c.ReplicaID, c.Term, s.leaderTerm)}, nil
	}
	charge := s.leaderElapsedMS
	if c.Epoch == s.epoch {
		charge = max(charge, c.PrevLeadershipMS)
	}
	for _, sess := range s.sessions {
		if sess.confirmedEpoch < s.epoch {
			// Silence beyond the lease means expired: saturate there (a
			// corrupt entry must not overflow into a longer lease).
			sess.silentMS = min(sess.silentMS+min(charge, sess.leaseMS), sess.leaseMS)
		}
	}
	s.chargeHandOver(c) // handover.go
	var changes []Change
	if r := c.Restored; r != nil && s.epoch < r.Floor {
		changes = s.restoreStart(index, r)
	}
	s.epoch = s.leaderEpochAfter(c.Restored)
	s.leaderID, s.leaderTerm = c.ReplicaID, c.Term
	s.leaderElapsedMS = 0
	return Result{Epoch: s.epoch}, changes
}

func (s *State) leaderTick(c *Command) Result {
	if c.Epoch != s.epoch {
		return Result{Err: api.Errorf(api.CodeNotLeader, "tick from leader epoch %d, now %d", c.Epoch, s.epoch)}
	}
	s.leaderElapsedMS = max(s.leaderElapsedMS, c.ElapsedMS)
	return Result{}
}

func (s *State) confirm(c *Command) Result {
	if c.Epoch != s.epoch {
		return Result{Err: api.Errorf(api.CodeNotLeader, "confirm from leader epoch %d, now %d", c.Epoch, s.epoch)}
	}
	for _, id := range c.Sessions {
		if sess, ok := s.sessions[id]; ok {
			sess.confirmedEpoch, sess.silentMS = s.epoch, 0
		}
	}
	return Result{}
}

// endSession deletes the session's ephemeral nodes, in path order, and
// remembers the id as ended. A lock it held with a lock-delay goes into
// its delay (atMS: the proposer's clock, shown only).
func (s *State) endSession(index uint64, id uint64, atMS int64) []Change {
	sess := s.sessions[id]
	paths := make([]string, 0, len(sess.ephemerals))
	for p := range sess.ephemerals {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var changes []Change
	for _, p := range paths {
		n := s.nodes[p]
		if n.lock != api.LockNone {
			if ch, ok := s.releaseLock(index, n, atMS); ok {
				changes = append(changes, ch)
			}
		}
		changes = append(changes, s.removeWithContainers(index, n)...) // container.go
	}
	s.forgetCached(sess)
	delete(s.sessions, id)
	s.use(sess.tenant, -1, 0, 0)
	s.ended[id] = struct{}{}
	s.endedOrder = append(s.endedOrder, id)
	if len(s.endedOrder) > MaxEndedSessions {
		delete(s.ended, s.endedOrder[0])
		s.endedOrder = s.endedOrder[1:]
	}
	return changes
}

// addEphemeral records an ephemeral node of the session.
func (sess *session) addEphemeral(path string) {
	if sess.ephemerals == nil {
		sess.ephemerals = map[string]struct{}{}
	}
	sess.ephemerals[path] = struct{}{}
}

// dropEphemeral forgets an ephemeral node of the session (the set stays:
// a session that held one will likely hold another).
func (sess *session) dropEphemeral(path string) {
	delete(sess.ephemerals, path)
}

func (sess *session) ack(below uint64) {
	if below <= sess.ackedBelow {
		return
	}
	sess.ackedBelow = below
	i := sort.Search(len(sess.results), func(i int) bool { return sess.results[i].id >= below })
	sess.results = append(sess.results[:0:0], sess.results[i:]...)
}

func (sess *session) lookup(id uint64) ([]byte, bool) {
	i := sort.Search(len(sess.results), func(i int) bool { return sess.results[i].id >= id })
	if i < len(sess.results) && sess.results[i].id == id {
		return sess.results[i].result, true
	}
	return nil, false
}

func (sess *session) record(id uint64, result []byte) {
	i := sort.Search(len(sess.results), func(i int) bool { return sess.results[i].id >= id })
	sess.results = append(sess.results, requestResult{})
	copy(sess.results[i+1:], sess.results[i:])
	sess.results[i] = requestResult{id: id, result: result}
	if len(sess.results) > api.MaxSessionRequestWindow {
		// Forget the oldest; a retry of it is now stale rather than re-applied.
		sess.ackedBelow = sess.results[0].id + 1
		sess.results = sess.results[1:]
	}
}

// --- nodes ---

// SessionExists reports whether a session is live, and its error if not.
func (s *State) SessionExists(id uint64) *api.Error {
	_, err := s.liveSession(id)
	return err
}

// Sessions returns every live session's id and lease, in id order.
func (s *State) Sessions() []SessionInfo {
	out := make([]SessionInfo, 0, len(s.sessions))
	for _, sess := range s.sessions {
		out = append(out, SessionInfo{ID: sess.id, LeaseMS: sess.leaseMS, SilentMS: sess.silentMS, ConfirmedEpoch: sess.confirmedEpoch, Caches: sess.caches,
			Cached: cachedList(sess), CachedEpoch: sess.cachedEpoch})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SessionInfo is a live session as the session manager sees it.
type SessionInfo struct {
	ID      uint64
	LeaseMS int64
	// SilentMS is the recorded silence: a new leader grants LeaseMS-SilentMS.
	SilentMS int64
	// ConfirmedEpoch is the last leader epoch the session renewed under.
	ConfirmedEpoch uint64
	// Caches: its client caches reads. Cached: the nodes it was last
	// granted to cache (cachepaths.go), in path order.
	Caches bool
	Cached []string
	// CachedEpoch is the epoch whose leaders granted Cached (0: the
	// session cached before grants were recorded: it may cache anything).
	CachedEpoch uint64
}
