package fsm

import (
	"crypto/subtle"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lockservice/lockd/api"
)

// MaxEndedSessions is how many ended session ids the state remembers, so that
// a request naming a recently ended session gets session_expired rather than
// no_session.
const MaxEndedSessions = 16384

// seqDigits is the width of a sequential node's counter suffix.
const seqDigits = 10

const maxSeq = 9_999_999_999

type node struct {
	path        string
	parent      *node
	value       []byte
	version     uint64
	createIndex uint64
	modifyIndex uint64
	childIndex  uint64 // last child create/delete; starts at createIndex
	ephemeral   bool
	owner       uint64
	lock        api.LockMode
	seq         uint64 // sequence number of a sequential node
	nextSeq     uint64 // counter for this node's sequential children
	dirEpoch    uint64 // directory epoch, on prefix roots only
	// prefixState, on prefix roots only: "" (served here), sealed (moved
	// to movedTo: every write and read under it is refused with moved),
	// staging or staged (a migration is copying it here; not served yet).
	prefixState  string
	movedTo      string
	sealDirIndex uint64 // the directory index of the migration that sealed it
	tokenEpoch   uint64 // directory epoch of a lock node's token
	tenant       string // the tenant that created it, whose quota it counts against ("": none)
	children     map[string]*node
	// lockKids are the children that are lock nodes, in sequence order
	// (appended in creation order, which is sequence order).
	lockKids []*node
	// lockDelayMS, on a lock node: the lock-delay its unclean release
	// starts on its directory.
	lockDelayMS int64
	// delay, on a lock directory in lock-delay: nil otherwise.
	delay *lockDelay
	// move is its part in a prefix move (prefixmove.go), nil if none.
	move *moveState
	// delayEnded, on a lock directory: the index of the end_lock_delay
	// that last ended its delay (a re-armed watch that missed it fires).
	delayEnded uint64
}

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

// usage is what one tenant holds in the cell (derived: kept with every
// change and rebuilt from the sessions and nodes on restore).
type usage struct {
	sessions, nodes int
	bytes           int64
}

// State is the cell's namespace and sessions.
type State struct {
	index      uint64 // last applied Raft index
	epoch      uint64 // leader epoch: number of leader_start entries applied
	leaderID   uint64 // replica that committed the last leader_start
	leaderTerm uint64
	// leaderElapsedMS is how long the current leader has led, as its
	// leader_tick entries recorded.
	leaderElapsedMS int64
	root            *node
	nodes           map[string]*node // every node but the root, by path
	sessions        map[uint64]*session
	ended           map[uint64]struct{}
	endedOrder      []uint64 // FIFO of ended ids, oldest first
	// opens maps the nonce of each of the last api.MaxOpenNonces session
	// opens to the session it opened (openOrder: those opens, oldest
	// first), so that a retried open returns that session.
	opens     map[string]uint64
	openOrder []openNonce
	// lockDelays are the lock-delays of lock directories deleted while in
	// one, by path, until the leader ends them (lockdelay.go).
	lockDelays map[string]*lockDelay
	// keptBy counts lockDelays by the tenant owning each deleted
	// directory (derived: kept by putKept and dropKept; "" not counted).
	keptBy map[string]int
	// cachedBy indexes the sessions' cache records by path (derived:
	// rebuilt from the sessions on restore; cachepaths.go).
	cachedBy map[string]map[uint64]struct{}
	// frozen is the snapshot being written while applies continue, if
	// any: a change to a node it holds keeps the node's old image first
	// (touch). Soft: never part of the state's content or its snapshot.
	frozen *Frozen
	// bytes is the sum of every node's path and value (derived: rebuilt
	// from the nodes when a snapshot is read); limits the named per-cell
	// limits it enforces.
	bytes  int64
	limits cellLimits
	// tenants is each tenant's usage, for its quota (derived, like bytes).
	tenants map[string]*usage
}

// cellLimits are the named per-cell limits (api/limits.go). Every replica
// enforces the same ones; only tests shrink them.
type cellLimits struct {
	sessions, nodes, children int
	bytes                     int64
	deletedDelays             int
	deletedDelaysPerTenant    int
}

var defaultLimits = cellLimits{sessions: api.MaxSessionsPerCell, nodes: api.MaxNodesPerCell, children: api.MaxChildrenPerNode, bytes: api.MaxBytesPerCell,
	deletedDelays: api.MaxDeletedLockDelays, deletedDelaysPerTenant: api.MaxDeletedLockDelaysPerTenant}

func nodeBytes(n *node) int64 { return int64(len(n.path) + len(n.value)) }

// checkGrowth refuses a change that would add nodes and bytes past the
// cell's limits, before anything changes.
func (s *State) checkGrowth(nodes int, bytes int64) *api.Error {
	if nodes > 0 && len(s.nodes)+nodes > s.limits.nodes {
		return api.Errorf(api.CodeLimitExceeded, "the cell holds %d nodes, limit %d (MaxNodesPerCell)", len(s.nodes), s.limits.nodes)
	}
	if bytes > 0 && s.bytes+bytes > s.limits.bytes {
		return api.Errorf(api.CodeLimitExceeded, "the cell holds %d bytes of paths and values; %d more would pass the limit %d (MaxBytesPerCell)", s.bytes, bytes, s.limits.bytes)
	}
	return nil
}

// checkChildren refuses a new child of parent past MaxChildrenPerNode.
func (s *State) checkChildren(parent *node) *api.Error {
	if len(parent.children) >= s.limits.children {
		return api.Errorf(api.CodeLimitExceeded, "%s has %d children, limit %d (MaxChildrenPerNode)", parent.path, len(parent.children), s.limits.children)
	}
	return nil
}

type openNonce struct {
	nonce   string
	session uint64
}

// New returns an empty state: just the root.
func New() *State {
	return &State{
		root:     &node{path: "/", children: map[string]*node{}},
		nodes:    map[string]*node{},
		sessions: map[uint64]*session{},
		ended:    map[uint64]struct{}{},
		opens:    map[string]uint64{},
		limits:   defaultLimits,
		tenants:  map[string]*usage{},
	}
}

// Index is the last applied Raft index.
func (s *State) Index() uint64 { return s.index }

// Epoch is the leader epoch: it grows by one with every leader_start.
func (s *State) Epoch() uint64 { return s.epoch }

// Leader is the replica and term of the last leader_start.
func (s *State) Leader() (replicaID, term uint64) { return s.leaderID, s.leaderTerm }

// NumNodes is the number of nodes, prefix roots included.
func (s *State) NumNodes() int { return len(s.nodes) }

// NumSessions is the number of live sessions.
func (s *State) NumSessions() int { return len(s.sessions) }

// Applied is one applied entry: the command as decoded, its result, the
// result encoded for the proposer, and the paths it changed. The runtime
// beside the state machine reads it instead of decoding the entry again.
type Applied struct {
	Cmd     Command
	Result  Result
	Encoded []byte
	Changes []Change
}

// Apply applies the command encoded in data, committed at index, and returns
// the encoded Result and the paths it changed. See ApplyEntry.
func (s *State) Apply(index uint64, data []byte) ([]byte, []Change) {
	a := s.ApplyEntry(index, data)
	return a.Encoded, a.Changes
}

// ApplyEntry applies the command encoded in data, committed at index. A
// command that cannot be decoded or is refused changes no node and no
// session state, except that a session-scoped request still records its
// (error) result for dedupe and applies its ack: a retry must get the same
// answer.
func (s *State) ApplyEntry(index uint64, data []byte) Applied {
	if index <= s.index {
		panic(fmt.Sprintf("fsm: apply index %d after %d", index, s.index))
	}
	s.index = index
	cmd, err := DecodeCommand(data)
	if err != nil {
		return refused(index, Command{}, api.Errorf(api.CodeBadRequest, "undecodable entry: %v", err))
	}
	// A write naming a session is the session's only with its secret.
	if cmd.Session != 0 && cmd.Request == 0 && isDedupedOp(cmd.Op) {
		if _, serr := s.authSession(&cmd); serr != nil {
			return refused(index, cmd, serr)
		}
	}
	// Session-scoped writes with a request id are deduplicated: a retry gets
	// the first attempt's result and is never applied twice.
	if cmd.Session != 0 && cmd.Request != 0 && isDedupedOp(cmd.Op) {
		sess, serr := s.authSession(&cmd)
		if serr != nil {
			return refused(index, cmd, serr)
		}
		sess.ack(cmd.Ack)
		if cmd.Request < sess.ackedBelow {
			return refused(index, cmd, api.Errorf(api.CodeStaleRequest, "request %d of session %d was already answered", cmd.Request, cmd.Session))
		}
		if prev, ok := sess.lookup(cmd.Request); ok {
			res, _ := DecodeResult(prev) // written by Encode: cannot fail
			return Applied{Cmd: cmd, Result: res, Encoded: prev}
		}
		res, changes := s.apply(index, &cmd)
		s.uncache(changes)
		enc := res.Encode()
		// The op may have ended the session (close); only a live one
		// records. A refusal because the prefix is not served here (moved,
		// not yet, never) is not recorded: it applied nothing, and a retry
		// of the same request once the prefix is served must apply.
		if _, live := s.sessions[cmd.Session]; live && !routingRefusal(res.Err) {
			sess.record(cmd.Request, enc)
		}
		return Applied{Cmd: cmd, Result: res, Encoded: enc, Changes: changes}
	}
	res, changes := s.apply(index, &cmd)
	s.uncache(changes)
	return Applied{Cmd: cmd, Result: res, Encoded: res.Encode(), Changes: changes}
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
	if subtle.ConstantTimeCompare([]byte(sess.secret), []byte(c.Secret)) != 1 && !brokenSecret {
		return nil, api.Errorf(api.CodeUnauthorized, "wrong secret for session %d", c.Session)
	}
	return sess, nil
}

// CheckSecret answers, for the leader's KeepAlives and watches, whether
// secret is session id's: nil if it is or the session is not live (the
// caller reports that its own way), unauthorized if not.
func (s *State) CheckSecret(id uint64, secret string) *api.Error {
	sess, ok := s.sessions[id]
	if !ok || subtle.ConstantTimeCompare([]byte(sess.secret), []byte(secret)) == 1 || brokenSecret {
		return nil
	}
	return api.Errorf(api.CodeUnauthorized, "wrong secret for session %d", id)
}

// WatchQuota is how many watches a live session's tenant allows it to
// arm (its quota when the session opened); 0: no quota.
func (s *State) WatchQuota(id uint64) int {
	if sess, ok := s.sessions[id]; ok {
		return sess.maxWatches
	}
	return 0
}

// Usage is what tenant holds in the cell: sessions, nodes, bytes.
func (s *State) Usage(tenant string) (sessions, nodes int, bytes int64) {
	if u := s.tenants[tenant]; u != nil {
		return u.sessions, u.nodes, u.bytes
	}
	return 0, 0, 0
}

// use adds to a tenant's usage, dropping an entry that reaches zero.
func (s *State) use(tenant string, sessions, nodes int, bytes int64) {
	if tenant == "" {
		return
	}
	u := s.tenants[tenant]
	if u == nil {
		u = &usage{}
		s.tenants[tenant] = u
	}
	u.sessions += sessions
	u.nodes += nodes
	u.bytes += bytes
	if *u == (usage{}) {
		delete(s.tenants, tenant)
	}
}

// checkQuota refuses a change that would take the command's tenant past
// its quota (carried in the entry), before anything changes.
func (s *State) checkQuota(c *Command, sessions, nodes int, bytes int64) *api.Error {
	if c.Tenant == "" || c.Quota == nil {
		return nil
	}
	q := c.Quota.Effective()
	hs, hn, hb := s.Usage(c.Tenant)
	switch {
	case sessions > 0 && hs+sessions > q.Sessions:
		return api.Errorf(api.CodeQuotaExceeded, "tenant %s holds %d sessions on this cell, quota %d", c.Tenant, hs, q.Sessions)
	case nodes > 0 && hn+nodes > q.Nodes:
		return api.Errorf(api.CodeQuotaExceeded, "tenant %s holds %d nodes on this cell, quota %d", c.Tenant, hn, q.Nodes)
	case bytes > 0 && hb+bytes > q.Bytes:
		return api.Errorf(api.CodeQuotaExceeded, "tenant %s holds %d bytes on this cell; %d more would pass its quota %d", c.Tenant, hb, bytes, q.Bytes)
	}
	return nil
}

func refused(index uint64, cmd Command, err *api.Error) Applied {
	res := Result{Err: err, Index: index}
	return Applied{Cmd: cmd, Result: res, Encoded: res.Encode()}
}

func isDedupedOp(op Op) bool {
	switch op {
	case OpCreate, OpPut, OpDelete:
		return true
	}
	return false
}

func (s *State) apply(index uint64, c *Command) (Result, []Change) {
	var (
		res     Result
		changes []Change
	)
	switch c.Op {
	case OpOpenSession:
		res = s.openSession(index, c)
	case OpCloseSession:
		res, changes = s.closeSession(index, c)
	case OpExpireSession:
		res, changes = s.expireSession(index, c)
	case OpCreate:
		res, changes = s.create(index, c)
	case OpPut:
		res, changes = s.put(index, c)
	case OpDelete:
		res, changes = s.delete(index, c)
	case OpLeaderStart:
		res, changes = s.leaderStart(index, c)
	case OpLeaderTick:
		res = s.leaderTick(c)
	case OpConfirm:
		res = s.confirm(c)
	case OpCacheSession:
		res = s.cacheSession(c)
	case OpEnsurePrefix:
		res, changes = s.ensurePrefix(index, c)
	case OpSealPrefix:
		res, changes = s.sealPrefix(index, c)
	case OpUnsealPrefix:
		res, changes = s.unsealPrefix(index, c)
	case OpStagePrefix:
		res, changes = s.stagePrefix(index, c)
	case OpDropPrefix:
		res, changes = s.dropPrefix(index, c)
	case OpEndLockDelay:
		res, changes = s.endLockDelay(index, c)
	default:
		res = Result{Err: api.Errorf(api.CodeBadRequest, "unknown op %q", c.Op)}
	}
	res.Index = index
	return res, changes
}

// --- sessions ---

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
	sess := &session{id: index, leaseMS: clampLease(c.LeaseMS), confirmedEpoch: s.epoch, ephemerals: map[string]struct{}{},
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
	if tenant == "" || brokenNonceKey {
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
		changes = append(changes, s.removeNode(index, n)...)
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

func checkValue(v []byte) *api.Error {
	if len(v) > api.MaxValueSize {
		return api.Errorf(api.CodeValueTooLarge, "value is %d bytes, limit %d", len(v), api.MaxValueSize)
	}
	return nil
}

func asAPIError(err error) *api.Error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*api.Error); ok {
		return e
	}
	return api.Errorf(api.CodeInternal, "%v", err)
}

// checkNodePath validates a client path: well formed, below a prefix root
// this cell holds.
func (s *State) checkNodePath(p string) *api.Error {
	if err := api.ValidatePath(p); err != nil {
		return asAPIError(err)
	}
	if api.Parent(p) == "/" {
		return api.Errorf(api.CodeInvalidPath, "%s is a prefix root, managed by the cell", p)
	}
	return s.CheckServes(p)
}

// createPlan is a create that passed every check: what applyCreate needs.
type createPlan struct {
	path       string // final path (with the sequence suffix)
	parentPath string
	parent     *node    // nil: make_parents creates parentPath
	seq        uint64   // sequence number, for a sequential create
	sess       *session // owner, for an ephemeral create
	// parentNodes and parentBytes are the ancestors make_parents adds.
	parentNodes int
	parentBytes int64
}

// create is checkCreate, then applyCreate: a refused create changes nothing.
func (s *State) create(index uint64, c *Command) (Result, []Change) {
	p, err := s.checkCreate(index, c)
	if err != nil {
		return Result{Err: err}, nil
	}
	return s.applyCreate(index, c, p)
}

// checkCreate validates a create against the state without changing it.
func (s *State) checkCreate(index uint64, c *Command) (createPlan, *api.Error) {
	var p createPlan
	if err := s.checkNodePath(c.Path); err != nil {
		return p, err
	}
	if err := checkValue(c.Value); err != nil {
		return p, err
	}
	if !c.Lock.Valid() {
		return p, api.Errorf(api.CodeBadRequest, "unknown lock mode %q", c.Lock)
	}
	if c.LockDelayMS != 0 && c.Lock == api.LockNone {
		return p, api.Errorf(api.CodeBadRequest, "a lock-delay is for lock nodes only")
	}
	if c.LockDelayMS < 0 || c.LockDelayMS > api.MaxLockDelay.Milliseconds() {
		return p, api.Errorf(api.CodeBadRequest, "lock-delay %v is outside 0 to %v", time.Duration(c.LockDelayMS)*time.Millisecond, api.MaxLockDelay)
	}
	if c.Lock != api.LockNone {
		if !c.Ephemeral || !c.Sequential {
			return p, api.Errorf(api.CodeBadRequest, "a lock node must be ephemeral and sequential")
		}
		if err := s.checkTokenSpace(index, c.Path); err != nil {
			return p, err
		}
	}
	if c.Ephemeral {
		if c.Session == 0 {
			return p, api.Errorf(api.CodeNoSession, "an ephemeral node needs a session")
		}
		var err *api.Error
		if p.sess, err = s.authSession(c); err != nil {
			return p, err
		}
	}
	p.parentPath = api.Parent(c.Path)
	parent, ok := s.nodes[p.parentPath]
	if !ok && !c.MakeParents {
		return p, api.Errorf(api.CodeNoNode, "parent %s does not exist", p.parentPath)
	}
	if ok && parent.ephemeral {
		return p, api.Errorf(api.CodeBadRequest, "ephemeral node %s cannot have children", p.parentPath)
	}
	if ok {
		p.parent = parent
	} else {
		// make_parents would create the missing ancestors below the nearest
		// existing one, which must not be ephemeral either. The walk ends at
		// the latest at the prefix root, which checkNodePath found.
		q := api.Parent(p.parentPath)
		for s.nodes[q] == nil {
			q = api.Parent(q)
		}
		if s.nodes[q].ephemeral {
			return p, api.Errorf(api.CodeBadRequest, "ephemeral node %s cannot have children", q)
		}
		// The missing ancestors count against the limits too, and each
		// must lie within the caller's grant.
		for a := p.parentPath; a != q; a = api.Parent(a) {
			if c.ParentsFrom != "" && !api.Covers(c.ParentsFrom, a) && !brokenParentsFrom {
				return p, api.Errorf(api.CodeForbidden, "make_parents would create %s, outside the caller's grant on %s", a, c.ParentsFrom)
			}
			p.parentNodes++
			p.parentBytes += int64(len(a))
		}
		if err := s.checkChildren(s.nodes[q]); err != nil {
			return p, err
		}
	}
	if p.parent != nil {
		if err := s.checkChildren(p.parent); err != nil {
			return p, err
		}
	}
	p.path = c.Path
	if c.Sequential {
		if p.parent != nil {
			p.seq = p.parent.nextSeq
		} else {
			p.seq = s.seqFloor(p.parentPath) // a lock directory deleted in its delay
		}
		// Skip names a plain node already took, so one clash cannot block
		// every later sequential create under the parent.
		for {
			if p.seq > maxSeq {
				return p, api.Errorf(api.CodeBadRequest, "sequence counter of %s is exhausted", p.parentPath)
			}
			p.path = fmt.Sprintf("%s%0*d", c.Path, seqDigits, p.seq)
			if _, taken := s.nodes[p.path]; !taken {
				break
			}
			p.seq++
		}
		if len(p.path) > api.MaxPathLen {
			return p, api.Errorf(api.CodeInvalidPath, "sequential path is %d bytes, limit %d", len(p.path), api.MaxPathLen)
		}
	}
	if _, exists := s.nodes[p.path]; exists {
		return p, api.Errorf(api.CodeNodeExists, "%s exists", p.path)
	}
	if err := s.checkGrowth(1+p.parentNodes, int64(len(p.path)+len(c.Value))+p.parentBytes); err != nil {
		return p, err
	}
	if err := s.checkQuota(c, 0, 1+p.parentNodes, int64(len(p.path)+len(c.Value))+p.parentBytes); err != nil {
		return p, err
	}
	return p, nil
}

// applyCreate applies a checked create in full.
func (s *State) applyCreate(index uint64, c *Command, p createPlan) (Result, []Change) {
	var changes []Change
	parent := p.parent
	if parent == nil {
		parent, changes = s.makeParents(index, p.parentPath, c.Tenant)
	}
	n := &node{
		path: p.path, parent: parent, value: cloneBytes(c.Value), version: 1,
		createIndex: index, modifyIndex: index, childIndex: index,
		ephemeral: c.Ephemeral, lock: c.Lock, tenant: c.Tenant, children: map[string]*node{},
		lockDelayMS: c.LockDelayMS,
	}
	if c.Sequential {
		n.seq = p.seq
		s.touch(parent)
		parent.nextSeq = p.seq + 1
	}
	if n.lock != api.LockNone {
		// The token's epoch is fixed at grant: a later epoch raise does not
		// change a holder's token.
		n.tokenEpoch = s.nodes[api.Prefix(p.path)].dirEpoch
		if brokenMoveKeepsEpoch {
			n.tokenEpoch = 1
		}
	}
	if p.sess != nil {
		n.owner = p.sess.id
		p.sess.ephemerals[p.path] = struct{}{}
	}
	s.link(index, n)
	changes = append(changes, Change{Path: p.path, Type: ChangeCreated, Index: index}, Change{Path: parent.path, Type: ChangeChildren, Index: index})
	res := Result{Node: s.meta(n, false)}
	if n.lock != api.LockNone {
		res.Token = s.token(n)
		if w := waitOn(n); w != nil {
			res.WaitFor = w.path
		}
	}
	return res, changes
}

// checkTokenSpace refuses a lock node whose fencing token would not
// compare above every earlier one: its create index past the token's index
// bits (it would wrap), or its prefix's directory epoch past MaxTokenEpoch
// (a state from before the limit; the token would be negative as int64).
func (s *State) checkTokenSpace(index uint64, path string) *api.Error {
	if index > api.MaxTokenIndex {
		return api.Errorf(api.CodeTokenExhausted, "lock create at index %d: fencing-token index space ends at %d; move the prefix to a new cell", index, uint64(api.MaxTokenIndex))
	}
	if e := s.nodes[api.Prefix(path)].dirEpoch; e > api.MaxTokenEpoch {
		return api.Errorf(api.CodeTokenExhausted, "directory epoch %d of %s is over the token limit %d", e, api.Prefix(path), uint64(api.MaxTokenEpoch))
	}
	return nil
}

// TokenHeadroom is how many more Raft indices the cell can apply before
// lock creates are refused (token_exhausted).
func (s *State) TokenHeadroom() uint64 {
	if s.index >= api.MaxTokenIndex {
		return 0
	}
	return api.MaxTokenIndex - s.index
}

// makeParents creates the missing persistent ancestors of p (below its
// prefix root, which exists: checkNodePath ensured it) and returns p's node.
func (s *State) makeParents(index uint64, p, tenant string) (*node, []Change) {
	var missing []string
	for q := p; ; q = api.Parent(q) {
		if _, ok := s.nodes[q]; ok {
			break
		}
		missing = append(missing, q)
	}
	var changes []Change
	for i := len(missing) - 1; i >= 0; i-- {
		q := missing[i]
		n := &node{path: q, parent: s.nodes[api.Parent(q)], version: 1, createIndex: index, modifyIndex: index, childIndex: index, tenant: tenant, children: map[string]*node{}}
		s.link(index, n)
		changes = append(changes, Change{Path: q, Type: ChangeCreated, Index: index}, Change{Path: n.parent.path, Type: ChangeChildren, Index: index})
	}
	return s.nodes[p], changes
}

func (s *State) link(index uint64, n *node) {
	s.takeDelay(n)
	s.nodes[n.path] = n
	s.bytes += nodeBytes(n)
	s.use(n.tenant, 0, 1, nodeBytes(n))
	n.parent.children[api.Base(n.path)] = n
	s.touch(n.parent)
	n.parent.childIndex = index
	if n.lock != api.LockNone {
		n.parent.lockKids = append(n.parent.lockKids, n)
	}
}

func (s *State) put(index uint64, c *Command) (Result, []Change) {
	if err := s.checkNodePath(c.Path); err != nil {
		return Result{Err: err}, nil
	}
	if err := checkValue(c.Value); err != nil {
		return Result{Err: err}, nil
	}
	n, ok := s.nodes[c.Path]
	if !ok {
		if c.OwnOnly {
			return Result{Err: api.Errorf(api.CodeForbidden, "%s does not exist: creating it needs the write role", c.Path)}, nil
		}
		if c.Version != nil && *c.Version != 0 {
			return Result{Err: api.Errorf(api.CodeNoNode, "%s does not exist", c.Path)}, nil
		}
		create := Command{Op: OpCreate, Path: c.Path, Value: c.Value, MakeParents: c.MakeParents, ParentsFrom: c.ParentsFrom, Tenant: c.Tenant, Quota: c.Quota}
		return s.create(index, &create)
	}
	if err := mayChange(c, n); err != nil {
		return Result{Err: err}, nil
	}
	if c.Version != nil {
		if *c.Version == 0 {
			return Result{Err: api.Errorf(api.CodeNodeExists, "%s exists", c.Path)}, nil
		}
		if *c.Version != n.version {
			return Result{Err: api.Errorf(api.CodeVersionMismatch, "%s is at version %d, not %d", c.Path, n.version, *c.Version)}, nil
		}
	}
	if err := s.checkGrowth(0, int64(len(c.Value)-len(n.value))); err != nil {
		return Result{Err: err}, nil
	}
	if n.tenant == c.Tenant {
		// A node counts against the tenant that made it; another's write
		// to it (a shared config, granted to both) grows the maker's.
		if err := s.checkQuota(c, 0, 0, int64(len(c.Value)-len(n.value))); err != nil {
			return Result{Err: err}, nil
		}
	}
	s.touch(n)
	s.bytes += int64(len(c.Value) - len(n.value))
	s.use(n.tenant, 0, 0, int64(len(c.Value)-len(n.value)))
	n.value = cloneBytes(c.Value)
	n.version++
	n.modifyIndex = index
	return Result{Node: s.meta(n, false)}, []Change{{Path: n.path, Type: ChangeData, Index: index}}
}

// mayChange refuses a write or delete of another session's ephemeral
// node (a lock holder's node, an election candidate), unless from an
// admin. The command's session, if any, was authenticated in ApplyEntry.
func mayChange(c *Command, n *node) *api.Error {
	if c.OwnOnly && (!n.ephemeral || c.Session != n.owner) {
		return api.Errorf(api.CodeForbidden, "%s is not an ephemeral node of session %d: changing it needs the write role", n.path, c.Session)
	}
	if !n.ephemeral || c.Admin || c.Session == n.owner {
		return nil
	}
	return api.Errorf(api.CodeForbidden, "%s is ephemeral node of session %d: only that session or an admin may change it", n.path, n.owner)
}

func (s *State) delete(index uint64, c *Command) (Result, []Change) {
	if err := s.checkNodePath(c.Path); err != nil {
		return Result{Err: err}, nil
	}
	n, ok := s.nodes[c.Path]
	if !ok {
		return Result{Err: api.Errorf(api.CodeNoNode, "%s does not exist", c.Path)}, nil
	}
	if err := mayChange(c, n); err != nil {
		return Result{Err: err}, nil
	}
	if c.Version != nil && *c.Version != n.version {
		return Result{Err: api.Errorf(api.CodeVersionMismatch, "%s is at version %d, not %d", c.Path, n.version, *c.Version)}, nil
	}
	if len(n.children) > 0 {
		return Result{Err: api.Errorf(api.CodeNotEmpty, "%s has %d children", c.Path, len(n.children))}, nil
	}
	if err := s.checkKeepDelay(n); err != nil {
		return Result{Err: err}, nil
	}
	meta := s.meta(n, false)
	return Result{Node: meta}, s.removeNode(index, n) // a lock-delay outlives its directory

}

// removeNode unlinks a childless node. A lock-delay it holds, with its
// sequence counter, outlives it (keepDelay), whatever removes it.
func (s *State) removeNode(index uint64, n *node) []Change {
	s.keepDelay(n)
	p := n.parent
	delete(p.children, api.Base(n.path))
	delete(s.nodes, n.path)
	s.bytes -= nodeBytes(n)
	s.use(n.tenant, 0, -1, -nodeBytes(n))
	s.touch(p)
	p.childIndex = index
	if n.lock != api.LockNone {
		for i, k := range p.lockKids {
			if k == n {
				p.lockKids = append(p.lockKids[:i:i], p.lockKids[i+1:]...)
				break
			}
		}
	}
	if n.ephemeral {
		if sess, ok := s.sessions[n.owner]; ok {
			delete(sess.ephemerals, n.path)
		}
	}
	return []Change{{Path: n.path, Type: ChangeDeleted, Index: index}, {Path: p.path, Type: ChangeChildren, Index: index}}
}

func (s *State) ensurePrefix(index uint64, c *Command) (Result, []Change) {
	if err := api.ValidatePath(c.Path); err != nil {
		return Result{Err: asAPIError(err)}, nil
	}
	if api.Parent(c.Path) != "/" {
		return Result{Err: api.Errorf(api.CodeInvalidPath, "%s is not a top-level prefix", c.Path)}, nil
	}
	if c.Epoch > api.MaxTokenEpoch {
		// Tokens under it would not fit 63 bits (int64 in SQL goes negative).
		return Result{Err: api.Errorf(api.CodeTokenExhausted, "directory epoch %d is over the token limit %d", c.Epoch, uint64(api.MaxTokenEpoch))}, nil
	}
	if n, ok := s.nodes[c.Path]; ok {
		switch n.prefixState {
		case PrefixSealed:
			// Only an aborted migration unseals (unseal_prefix): a stale
			// view of the directory must never revive a moved prefix.
			return Result{Err: movedErr(n)}, nil
		case PrefixStaging:
			return Result{Err: api.Errorf(api.CodeUnavailable, "the copy of %s is incomplete: it is served once every page is staged", c.Path)}, nil
		}
		if c.Staged && n.prefixState != PrefixStaged && n.dirEpoch < c.Epoch {
			return Result{Err: noCopy(c.Path, c.Epoch)}, nil
		}
		var changes []Change
		if c.Epoch > n.dirEpoch || n.prefixState == PrefixStaged { // the directory epoch only goes up
			if n.prefixState == PrefixStaged {
				changes = s.startMovedDelays(index, n, c.AtMS) // the lock-delays that moved with it start here
			}
			s.touch(n)
			n.dirEpoch = max(n.dirEpoch, c.Epoch)
			n.prefixState = "" // a staged copy is served from here on
		}
		return Result{Node: s.meta(n, false), Epoch: n.dirEpoch}, changes
	}
	if c.Staged {
		return Result{Err: noCopy(c.Path, c.Epoch)}, nil
	}
	n := &node{path: c.Path, parent: s.root, version: 1, createIndex: index, modifyIndex: index, childIndex: index, dirEpoch: max(c.Epoch, 1), children: map[string]*node{}}
	s.link(index, n)
	return Result{Node: s.meta(n, false), Epoch: n.dirEpoch}, []Change{{Path: n.path, Type: ChangeCreated, Index: index}}
}

// noCopy refuses to serve a prefix that moved here without its nodes.
func noCopy(path string, epoch uint64) *api.Error {
	return api.Errorf(api.CodeConflict, "prefix %s moved here at epoch %d but no complete copy of it is staged: not served (an empty prefix would lose its nodes)", path, epoch)
}

// --- locks ---

// waitFor is the lock sibling n must see deleted before it re-checks, nil if
// n holds the lock. An exclusive node waits for the nearest lower lock node
// of either mode; a shared node for the nearest lower exclusive one.
func waitFor(n *node) *node {
	kids := n.parent.lockKids
	i := sort.Search(len(kids), func(i int) bool { return kids[i].seq >= n.seq })
	for j := i - 1; j >= 0; j-- {
		if n.lock == api.LockExclusive || kids[j].lock == api.LockExclusive {
			return kids[j]
		}
	}
	return nil
}

// waitOn is what lock node n waits for, nil if it holds the lock: its
// predecessor (waitFor), or, while its directory is in lock-delay and n
// did not hold at the release, the directory itself (whose delay's end
// wakes its waiters).
func waitOn(n *node) *node {
	if w := waitFor(n); w != nil {
		return w
	}
	if d := n.parent.delay; d != nil && n.seq > d.keepSeq {
		return n.parent
	}
	return nil
}

// token is the fencing token of a lock node: its create index under its
// prefix's directory epoch.
func (s *State) token(n *node) uint64 {
	return api.MakeToken(n.tokenEpoch, n.createIndex)
}

// --- reads ---

func (s *State) meta(n *node, withValue bool) *api.Node {
	m := &api.Node{
		Path: n.path, Version: n.version, CreateIndex: n.createIndex, ModifyIndex: n.modifyIndex,
		ChildIndex: n.childIndex, Ephemeral: n.ephemeral, Owner: n.owner, Lock: n.lock, NumChildren: len(n.children),
	}
	if withValue {
		m.Value = cloneBytes(n.value)
	}
	return m
}

// Get returns a node with its value.
func (s *State) Get(path string) (api.Node, bool) {
	n, ok := s.nodes[path]
	if !ok {
		return api.Node{}, false
	}
	return *s.meta(n, true), true
}

// Children returns a node and its children's names, sorted.
func (s *State) Children(path string) (api.Node, []string, bool) {
	n, ok := s.nodes[path]
	if !ok {
		return api.Node{}, nil, false
	}
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	sort.Strings(names)
	return *s.meta(n, false), names, true
}

// LockState says whether the lock node at path exists, holds its lock, and
// which sibling it waits for otherwise.
func (s *State) LockState(path string) (exists, held bool, waitingFor string, token uint64) {
	n, ok := s.nodes[path]
	if !ok || n.lock == api.LockNone {
		return false, false, "", 0
	}
	if w := waitOn(n); w != nil {
		return true, false, w.path, s.token(n)
	}
	return true, true, "", s.token(n)
}

// LockQueue lists the lock nodes under dir in queue order (at most limit;
// more reports the rest), each with whether it holds and its token.
func (s *State) LockQueue(dir string, limit int) (entries []api.LockEntry, more bool, err *api.Error) {
	n, ok := s.nodes[dir]
	if !ok {
		return nil, false, api.Errorf(api.CodeNoNode, "%s does not exist", dir)
	}
	for i, k := range n.lockKids {
		if i == limit {
			return entries, true, nil
		}
		entries = append(entries, api.LockEntry{Node: k.path, Mode: k.lock, Session: k.owner, Held: waitOn(k) == nil,
			Token: s.token(k), CreateIndex: k.createIndex})
	}
	return entries, false, nil
}

// CheckToken reports whether token is held on the lock dir now, and the
// tokens that hold it. A dir that does not exist holds nothing.
func (s *State) CheckToken(dir string, token uint64) (valid bool, holders []uint64) {
	n, ok := s.nodes[dir]
	if !ok {
		return false, nil
	}
	// The holders are a prefix of the queue: one exclusive node, or the
	// leading shared ones.
	for _, k := range n.lockKids {
		if waitOn(k) != nil {
			break
		}
		t := s.token(k)
		holders = append(holders, t)
		valid = valid || t == token || (brokenCheckAnyGranted && token < t)
	}
	return valid, holders
}

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

// WatchCheck decides whether a watch armed at since must fire at once
// because the node changed after since, and with which event. For a missing
// node it uses the nearest existing ancestor's child index, which moves on
// any create or delete below it: a node created and deleted while the client
// was away still fires the watch (the record outlives the node).
func (s *State) WatchCheck(path string, kind api.WatchKind, since uint64) (api.EventType, bool) {
	n, ok := s.nodes[path]
	if ok {
		switch kind {
		case api.WatchData:
			if n.createIndex > since {
				return api.EventCreated, true
			}
			if n.modifyIndex > since {
				return api.EventDataChanged, true
			}
			if n.delayEnded > since {
				return api.EventLockDelayEnded, true
			}
		case api.WatchChildren:
			if n.childIndex > since {
				return api.EventChildrenChanged, true
			}
		}
		return "", false
	}
	if kind == api.WatchChildren {
		return api.EventDeleted, true
	}
	for q := api.Parent(path); ; q = api.Parent(q) {
		a := s.root
		if q != "/" {
			var found bool
			if a, found = s.nodes[q]; !found {
				continue
			}
		}
		if a.childIndex > since || a.createIndex > since {
			return api.EventDeleted, true
		}
		return "", false
	}
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// checkUsage verifies each tenant's usage against the sessions and nodes.
func (s *State) checkUsage() error {
	want := map[string]usage{}
	for _, sess := range s.sessions {
		if sess.tenant != "" {
			u := want[sess.tenant]
			u.sessions++
			want[sess.tenant] = u
		}
	}
	for _, n := range s.nodes {
		if n.tenant != "" {
			u := want[n.tenant]
			u.nodes++
			u.bytes += nodeBytes(n)
			want[n.tenant] = u
		}
	}
	if len(want) != len(s.tenants) {
		return fmt.Errorf("usage kept for %d tenants, %d hold something", len(s.tenants), len(want))
	}
	for t, u := range want {
		if got := s.tenants[t]; got == nil || *got != u {
			return fmt.Errorf("tenant %s usage %+v, holds %+v", t, got, u)
		}
	}
	return nil
}

// CheckInvariants verifies the structure's internal consistency. Tests and
// fuzzers call it after every apply.
func (s *State) CheckInvariants() error {
	var total int64
	for _, n := range s.nodes {
		total += nodeBytes(n)
	}
	if total != s.bytes {
		return fmt.Errorf("byte count %d, the nodes hold %d", s.bytes, total)
	}
	if err := s.checkUsage(); err != nil {
		return err
	}
	if err := s.checkCached(); err != nil {
		return err
	}
	if err := s.checkLockDelays(); err != nil {
		return err
	}
	count := 0
	var walk func(n *node) error
	walk = func(n *node) error {
		for name, k := range n.children {
			count++
			if k.parent != n || api.Join(n.path, name) != k.path || s.nodes[k.path] != k {
				return fmt.Errorf("child %s of %s is mislinked", name, n.path)
			}
			if d := k.delay; d != nil {
				if err := s.checkDelayRange(k.path, d, k.nextSeq); err != nil {
					return err
				}
			}
			if k.lockDelayMS != 0 && (k.lock == api.LockNone || k.lockDelayMS < 0 || k.lockDelayMS > api.MaxLockDelay.Milliseconds()) {
				return fmt.Errorf("node %s has lock-delay %d ms", k.path, k.lockDelayMS)
			}
			if k.ephemeral && k.delay != nil && !brokenEphDelay {
				return fmt.Errorf("ephemeral %s holds a lock-delay", k.path)
			}
			if k.ephemeral {
				sess, ok := s.sessions[k.owner]
				if !ok {
					return fmt.Errorf("ephemeral %s owned by dead session %d", k.path, k.owner)
				}
				if _, ok := sess.ephemerals[k.path]; !ok {
					return fmt.Errorf("ephemeral %s missing from session %d", k.path, k.owner)
				}
				if len(k.children) > 0 {
					return fmt.Errorf("ephemeral %s has children", k.path)
				}
			}
			if err := walk(k); err != nil {
				return err
			}
		}
		locks := 0
		for _, k := range n.children {
			if k.lock != api.LockNone {
				locks++
			}
		}
		if locks != len(n.lockKids) {
			return fmt.Errorf("%s has %d lock children but %d in order", n.path, locks, len(n.lockKids))
		}
		for i := 1; i < len(n.lockKids); i++ {
			if n.lockKids[i-1].seq >= n.lockKids[i].seq {
				return fmt.Errorf("%s lock order broken", n.path)
			}
		}
		return nil
	}
	if err := walk(s.root); err != nil {
		return err
	}
	if count != len(s.nodes) {
		return fmt.Errorf("%d nodes reachable, %d indexed", count, len(s.nodes))
	}
	if len(s.openOrder) > api.MaxOpenNonces {
		return fmt.Errorf("%d open nonces remembered, limit %d", len(s.openOrder), api.MaxOpenNonces)
	}
	last := make(map[string]uint64, len(s.openOrder))
	for _, o := range s.openOrder {
		last[o.nonce] = o.session
	}
	if len(last) != len(s.opens) {
		return fmt.Errorf("%d open nonces mapped, %d in the window", len(s.opens), len(last))
	}
	for n, id := range last {
		if s.opens[n] != id {
			return fmt.Errorf("open nonce %q maps to session %d, window says %d", n, s.opens[n], id)
		}
	}
	for id, sess := range s.sessions {
		for p := range sess.ephemerals {
			if n, ok := s.nodes[p]; !ok || n.owner != id || !strings.HasPrefix(p, "/") {
				return fmt.Errorf("session %d lists %s it does not own", id, p)
			}
		}
	}
	return nil
}
