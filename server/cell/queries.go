package cell

// The reads of a replica's applied state: one typed function per query,
// run by read (linearizable) or readLocal (this replica's state) under the
// machine's read lock, which makes a read and its watch registration
// atomic with respect to applies.

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/fsm"
)

// The reads naming a session carry its secret, checked in the query.
type (
	getQuery struct {
		path, secret string
		session      uint64
		watch        api.WatchKind
	}
	childrenQuery struct {
		path, secret string
		session      uint64
		watch        bool
	}
	lockStateQuery struct {
		path, secret string
		session      uint64
		watch        bool
	}
	watchQuery struct {
		secret  string
		session uint64
		specs   []api.WatchSpec
	}
)

var errNotLeading = api.Errorf(api.CodeNotLeader, "this replica does not lead the cell")

// checkSession checks a named session's secret (none named: nothing to
// check). Only a real error is returned: CheckSecret's is a typed
// *api.Error, and a nil one in an error is not a nil error.
func checkSession(s *fsm.State, session uint64, secret string) error {
	if session == 0 {
		return nil
	}
	if err := s.CheckSecret(session, secret); err != nil {
		return err
	}
	return nil
}

// lookupGet reads a node, arming q's watch.
func (c *Cell) lookupGet(s *fsm.State, q getQuery) (api.GetResponse, error) {
	if err := checkSession(s, q.session, q.secret); err != nil {
		return api.GetResponse{}, err
	}
	if err := s.CheckServes(q.path); err != nil {
		return api.GetResponse{}, err
	}
	// As in ZooKeeper: a data watch on a missing node is an exists-watch
	// (answers exists=false, fires on create); any other get of a
	// missing node answers no_node and arms nothing, since the client
	// was told there is nothing to watch.
	n, ok := s.Get(q.path)
	if !ok && q.watch != api.WatchData {
		return api.GetResponse{}, api.Errorf(api.CodeNoNode, "%s does not exist", q.path)
	}
	if q.watch != "" {
		if err := c.canWatch(s, q.session, 1); err != nil {
			return api.GetResponse{}, err
		}
		c.watches.Register(q.session, tenantOf(s, q.session), q.path, q.watch)
	}
	return api.GetResponse{Exists: ok, Node: n, Index: s.Index()}, nil
}

// lookupChildren lists a node's children, arming q's watch.
func (c *Cell) lookupChildren(s *fsm.State, q childrenQuery) (api.ChildrenResponse, error) {
	if err := checkSession(s, q.session, q.secret); err != nil {
		return api.ChildrenResponse{}, err
	}
	if err := s.CheckServes(q.path); err != nil {
		return api.ChildrenResponse{}, err
	}
	n, names, ok := s.Children(q.path)
	if !ok {
		return api.ChildrenResponse{}, api.Errorf(api.CodeNoNode, "%s does not exist", q.path)
	}
	if q.watch {
		if err := c.canWatch(s, q.session, 1); err != nil {
			return api.ChildrenResponse{}, err
		}
		c.watches.Register(q.session, tenantOf(s, q.session), q.path, api.WatchChildren)
	}
	return api.ChildrenResponse{Node: n, Children: names, Index: s.Index()}, nil
}

// lookupLockState re-checks a lock node, arming q's watch: a waiter
// watches its predecessor; a holder its own node, so the re-list that
// finds it holding is also its grant. A lock's own wait is not counted
// against the session's watch limit.
func (c *Cell) lookupLockState(s *fsm.State, q lockStateQuery) (api.LockStateResponse, error) {
	if err := checkSession(s, q.session, q.secret); err != nil {
		return api.LockStateResponse{}, err
	}
	if err := s.CheckServes(q.path); err != nil {
		return api.LockStateResponse{}, err
	}
	exists, held, waitFor, token := s.LockState(q.path)
	if q.watch && exists {
		if err := c.canWatch(s, q.session, 0); err != nil {
			return api.LockStateResponse{}, err
		}
		watched := waitFor
		if held {
			watched = q.path
		}
		c.watches.Register(q.session, tenantOf(s, q.session), watched, api.WatchData)
	}
	var version uint64
	if n, ok := s.Get(q.path); ok && exists {
		version = n.Version
	}
	resp := api.LockStateResponse{Exists: exists, Held: held, WaitFor: waitFor, Token: token, Version: version, Index: s.Index()}
	if d, ok := s.LockDelayOf(waitFor); ok {
		resp.Delay = d.Info()
	}
	return resp, nil
}

// lookupWatch re-arms q's watches, each firing at once if its node
// changed since the index the client saw; all or none.
func (c *Cell) lookupWatch(s *fsm.State, q watchQuery) (api.WatchResponse, error) {
	if err := checkSession(s, q.session, q.secret); err != nil {
		return api.WatchResponse{}, err
	}
	if err := c.canWatch(s, q.session, len(q.specs)); err != nil {
		return api.WatchResponse{}, err
	}
	for _, w := range q.specs {
		if err := s.CheckServes(w.Path); err != nil {
			return api.WatchResponse{}, err
		}
	}
	for _, w := range q.specs {
		if typ, fire := s.WatchCheck(w.Path, w.Kind, w.Since); fire {
			c.watches.FireNow(q.session, api.Event{Type: typ, Path: w.Path, Kind: w.Kind, Index: s.Index()})
		} else {
			c.watches.Register(q.session, tenantOf(s, q.session), w.Path, w.Kind)
		}
	}
	return api.WatchResponse{Index: s.Index()}, nil
}

// sessionQuery confirms, after a ReadIndex, that a session is live and
// that this replica still leads under epoch.
type sessionQuery struct {
	session uint64
	epoch   uint64
}

// run answers the index read at.
func (q sessionQuery) run(s *fsm.State) (uint64, error) {
	if s.Epoch() != q.epoch {
		return 0, errNotLeading
	}
	if err := s.SessionExists(q.session); err != nil {
		return 0, err
	}
	return s.Index(), nil
}

// secretQuery checks sessions' secrets (parallel slices).
type secretQuery struct {
	sessions []uint64
	secrets  []string
	// renew, if set, is asked about each session's tenant once its
	// secret passed: a tenant whose sessions may not be renewed.
	renew RenewCheck
}

// run answers an error per session, nil where it passed.
func (q secretQuery) run(s *fsm.State) ([]error, error) {
	errs := make([]error, len(q.sessions))
	for i, id := range q.sessions {
		if err := s.CheckSecret(id, q.secrets[i]); err != nil {
			errs[i] = err
		} else if tenant, live := s.SessionTenant(id); live && q.renew != nil {
			errs[i] = q.renew(tenant)
		}
	}
	return errs, nil
}

// prefixQuery reads where a prefix stands on this cell.
type prefixQuery struct{ prefix string }

type prefixState struct {
	fsm.PrefixInfo
	index uint64
}

func (q prefixQuery) run(s *fsm.State) (prefixState, error) {
	return prefixState{PrefixInfo: s.PrefixState(q.prefix), index: s.Index()}, nil
}

// exportQuery reads one page of a sealed prefix's nodes.
type exportQuery struct {
	prefix, after string
	limit         int
}

func (q exportQuery) run(s *fsm.State) (api.PrefixOpResponse, error) {
	nodes, more, err := s.ExportPrefix(q.prefix, q.after, q.limit)
	if err != nil {
		return api.PrefixOpResponse{}, err
	}
	return api.PrefixOpResponse{Index: s.Index(), State: fsm.PrefixSealed, Nodes: nodes, More: more}, nil
}

// lockQueueQuery reads a lock's holders and waiters.
type lockQueueQuery struct{ path string }

func (q lockQueueQuery) run(s *fsm.State) (api.LockQueueResponse, error) {
	if err := s.CheckServes(q.path); err != nil {
		return api.LockQueueResponse{}, err
	}
	entries, more, err := s.LockQueue(q.path, api.MaxLockQueue)
	if err != nil && err.Code != api.CodeNoNode {
		return api.LockQueueResponse{}, err
	}
	// A lock nobody holds or waits for has no directory (its recipe's
	// container went with its last node): an empty queue, with the
	// lock-delay a deleted directory keeps, not no_node.
	if entries == nil {
		entries = []api.LockEntry{}
	}
	resp := api.LockQueueResponse{Path: q.path, Index: s.Index(), Entries: entries, More: more}
	semaphoreInfo(s, &resp)
	if d, ok := s.LockDelayOf(q.path); ok {
		resp.Delay = d.Info()
	}
	return resp, nil
}

// lockCheckQuery asks whether token holds the lock at path.
type lockCheckQuery struct {
	path  string
	token uint64
}

func (q lockCheckQuery) run(s *fsm.State) (api.LockCheckResponse, error) {
	if err := s.CheckServes(q.path); err != nil {
		return api.LockCheckResponse{}, err
	}
	valid, holders := s.CheckToken(q.path, q.token)
	return api.LockCheckResponse{Valid: valid, Holders: holders, Index: s.Index()}, nil
}

type stats struct {
	index, epoch    uint64
	sessions, nodes int
	tokenHeadroom   uint64
}

// statsOf reads the state's figures for the status and metrics.
func statsOf(s *fsm.State) (stats, error) {
	return stats{index: s.Index(), epoch: s.Epoch(), sessions: s.NumSessions(), nodes: s.NumNodes(), tokenHeadroom: s.TokenHeadroom()}, nil
}

// canWatch checks that a watch can be armed here: the session is live and
// this replica's session manager runs under the state's current epoch (a
// watch registered anywhere else would never be delivered).
func (c *Cell) canWatch(s *fsm.State, session uint64, more int) error {
	if session == 0 {
		return api.Errorf(api.CodeNoSession, "a watch needs a session")
	}
	if err := s.SessionExists(session); err != nil {
		return err
	}
	if active, epoch := c.sessions.Active(); !active || epoch != s.Epoch() {
		return errNotLeading
	}
	armed := c.watches.Armed(session)
	if more > 0 && armed+more > api.MaxWatchesPerSession {
		return api.Errorf(api.CodeLimitExceeded, "session %d has %d watches armed; %d more would pass the limit %d (MaxWatchesPerSession)", session, armed, more, api.MaxWatchesPerSession)
	}
	// The tenant's quota counts the watches of all its sessions on this
	// cell: many sessions do not multiply it.
	if q := s.WatchQuota(session); more > 0 && q > 0 {
		tenant := tenantOf(s, session)
		if byTenant := c.watches.ArmedByTenant(tenant); byTenant+more > q && !mutant.On(mutant.WatchQuota) {
			return api.Errorf(api.CodeQuotaExceeded, "tenant %s has %d watches armed on this cell; %d more would pass its quota %d", tenant, byTenant, more, q)
		}
		if armed+more > q {
			return api.Errorf(api.CodeQuotaExceeded, "session %d has %d watches armed; %d more would pass its tenant's quota %d", session, armed, more, q)
		}
	}
	return nil
}

// tenantOf is the tenant that opened a session ("" for none).
func tenantOf(s *fsm.State, session uint64) string {
	t, _ := s.SessionTenant(session)
	return t
}
