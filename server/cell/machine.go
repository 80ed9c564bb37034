package cell

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// machine adapts fsm.State to dragonboat's IConcurrentStateMachine, so a
// snapshot is written while applies go on. Its own RWMutex gives what
// dragonboat's regular state machine did: Update and RecoverFromSnapshot
// exclusive, Lookup shared — which makes a read plus its watch
// registration atomic with respect to applies. A snapshot holds the lock
// only to freeze the state (under a millisecond at 100 000 nodes) and for
// each batch of nodes it reads while writing; encoding and I/O run outside.
type machine struct {
	cell  *Cell
	mu    sync.RWMutex
	state *fsm.State
}

func (m *machine) Update(ents []sm.Entry) ([]sm.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range ents {
		a := m.state.ApplyEntry(ents[i].Index, ents[i].Cmd)
		m.cell.afterApply(m.state, &a)
		ents[i].Result = sm.Result{Value: ents[i].Index, Data: a.Encoded}
	}
	return ents, nil
}

func (m *machine) Lookup(q interface{}) (interface{}, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.cell.lookup(m.state, q)
}

// frozen is what PrepareSnapshot hands SaveSnapshot.
type frozen struct {
	f     *fsm.Frozen
	took  time.Duration // the freeze: how long applies waited for it
	state *fsm.State    // the state it froze (a restore may replace m.state)
}

func (m *machine) PrepareSnapshot() (interface{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	start := time.Now()
	f := m.state.Freeze()
	return &frozen{f: f, took: time.Since(start), state: m.state}, nil
}

// SaveSnapshot and RecoverFromSnapshot time themselves for the snapshot
// metrics (the state is untouched: the clock is read around it, not in it).
func (m *machine) SaveSnapshot(ctx interface{}, w io.Writer, _ sm.ISnapshotFileCollection, _ <-chan struct{}) error {
	fz := ctx.(*frozen)
	defer func() {
		m.mu.Lock()
		fz.state.Release(fz.f)
		m.mu.Unlock()
	}()
	start := time.Now()
	cw := &countingWriter{w: w, h: sha256.New()}
	hold := func() func() {
		m.mu.RLock()
		return m.mu.RUnlock
	}
	if err := fz.f.Write(cw, hold); err != nil {
		return err
	}
	m.cell.snapshots.saved(fz.f.Index(), cw.n, hex.EncodeToString(cw.h.Sum(nil)), time.Since(start), fz.took)
	return nil
}

func (m *machine) RecoverFromSnapshot(r io.Reader, _ []sm.SnapshotFile, _ <-chan struct{}) error {
	start := time.Now()
	h := sha256.New()
	in := &stickyEOF{r: io.TeeReader(r, h)}
	s, err := fsm.ReadSnapshot(in)
	if err != nil {
		return fmt.Errorf("cell %s: %w", m.cell.cfg.Info.Name, err)
	}
	if _, err := io.Copy(io.Discard, in); err != nil { // the digest covers every byte
		return fmt.Errorf("cell %s: %w", m.cell.cfg.Info.Name, err)
	}
	m.mu.Lock()
	m.state = s
	m.mu.Unlock()
	m.cell.snapshots.restored(s.Index(), hex.EncodeToString(h.Sum(nil)), time.Since(start))
	return nil
}

// countingWriter counts and digests what it passes on.
type countingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	return n, err
}

func (m *machine) Close() error { return nil }

// stickyEOF keeps returning io.EOF once its reader has. dragonboat's
// snapshot block reader hands back a zero-filled buffer on a Read after it
// returned EOF, which a strict decoder would take for trailing data (every
// snapshot over one 2 MiB block failed to restore).
type stickyEOF struct {
	r   io.Reader
	eof bool
}

func (s *stickyEOF) Read(p []byte) (int, error) {
	if s.eof {
		return 0, io.EOF
	}
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.eof = true
	}
	return n, err
}

// Queries answered by lookup, under dragonboat's read lock.
type (
	// The reads naming a session carry its secret, checked in the lookup.
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
	// sessionQuery confirms, after a ReadIndex, that a session is live and
	// that this replica still leads under epoch.
	sessionQuery struct {
		session uint64
		epoch   uint64
	}
	statsQuery     struct{}
	prefixQuery    struct{ prefix string }
	lockQueueQuery struct{ path string }
	lockCheckQuery struct {
		path  string
		token uint64
	}
	// secretQuery checks sessions' secrets (parallel slices): []error.
	secretQuery struct {
		sessions []uint64
		secrets  []string
		// renew, if set, is asked about each session's tenant once its
		// secret passed: a tenant whose sessions may not be renewed.
		renew RenewCheck
	}
	exportQuery struct {
		prefix, after string
		limit         int
	}
)

type prefixState struct {
	fsm.PrefixInfo
	index uint64
}

type stats struct {
	index, epoch    uint64
	sessions, nodes int
	tokenHeadroom   uint64
}

var errNotLeading = api.Errorf(api.CodeNotLeader, "this replica does not lead the cell")

func (c *Cell) lookup(s *fsm.State, q interface{}) (interface{}, error) {
	switch q := q.(type) {
	case getQuery:
		if q.session != 0 {
			if err := s.CheckSecret(q.session, q.secret); err != nil {
				return nil, err
			}
		}
		if err := s.CheckServes(q.path); err != nil {
			return nil, err
		}
		// As in ZooKeeper: a data watch on a missing node is an exists-watch
		// (answers exists=false, fires on create); any other get of a
		// missing node answers no_node and arms nothing, since the client
		// was told there is nothing to watch.
		n, ok := s.Get(q.path)
		if !ok && q.watch != api.WatchData {
			return nil, api.Errorf(api.CodeNoNode, "%s does not exist", q.path)
		}
		if q.watch != "" {
			if err := c.canWatch(s, q.session, 1); err != nil {
				return nil, err
			}
			c.watches.Register(q.session, tenantOf(s, q.session), q.path, q.watch)
		}
		return api.GetResponse{Exists: ok, Node: n, Index: s.Index()}, nil
	case childrenQuery:
		if q.session != 0 {
			if err := s.CheckSecret(q.session, q.secret); err != nil {
				return nil, err
			}
		}
		if err := s.CheckServes(q.path); err != nil {
			return nil, err
		}
		n, names, ok := s.Children(q.path)
		if !ok {
			return nil, api.Errorf(api.CodeNoNode, "%s does not exist", q.path)
		}
		if q.watch {
			if err := c.canWatch(s, q.session, 1); err != nil {
				return nil, err
			}
			c.watches.Register(q.session, tenantOf(s, q.session), q.path, api.WatchChildren)
		}
		return api.ChildrenResponse{Node: n, Children: names, Index: s.Index()}, nil
	case lockStateQuery:
		if q.session != 0 {
			if err := s.CheckSecret(q.session, q.secret); err != nil {
				return nil, err
			}
		}
		if err := s.CheckServes(q.path); err != nil {
			return nil, err
		}
		exists, held, waitFor, token := s.LockState(q.path)
		if q.watch && exists {
			if err := c.canWatch(s, q.session, 0); err != nil {
				return nil, err
			}
			// A waiter watches its predecessor; a holder its own node, so
			// the re-list that finds it holding is also its grant.
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
	case watchQuery:
		if q.session != 0 {
			if err := s.CheckSecret(q.session, q.secret); err != nil {
				return nil, err
			}
		}
		if err := c.canWatch(s, q.session, len(q.specs)); err != nil {
			return nil, err
		}
		for _, w := range q.specs {
			if err := s.CheckServes(w.Path); err != nil {
				return nil, err
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
	case sessionQuery:
		if s.Epoch() != q.epoch {
			return nil, errNotLeading
		}
		if err := s.SessionExists(q.session); err != nil {
			return nil, err
		}
		return s.Index(), nil
	case sessionsQuery:
		r := sessionsResult{index: s.Index(), errs: make([]error, len(q))}
		for i, chk := range q {
			if s.Epoch() != chk.epoch {
				r.errs[i] = errNotLeading
				continue
			}
			// Only a real error goes in: SessionExists returns a typed
			// *api.Error, and a nil one in an error is not a nil error.
			if err := s.SessionExists(chk.session); err != nil {
				r.errs[i] = err
			}
		}
		return r, nil
	case prefixQuery:
		return prefixState{PrefixInfo: s.PrefixState(q.prefix), index: s.Index()}, nil
	case exportQuery:
		nodes, more, err := s.ExportPrefix(q.prefix, q.after, q.limit)
		if err != nil {
			return nil, err
		}
		return api.PrefixOpResponse{Index: s.Index(), State: fsm.PrefixSealed, Nodes: nodes, More: more}, nil
	case secretQuery:
		errs := make([]error, len(q.sessions))
		for i, id := range q.sessions {
			if err := s.CheckSecret(id, q.secrets[i]); err != nil {
				errs[i] = err
			} else if tenant, live := s.SessionTenant(id); live && q.renew != nil {
				errs[i] = q.renew(tenant)
			}
		}
		return errs, nil
	case lockQueueQuery:
		if err := s.CheckServes(q.path); err != nil {
			return nil, err
		}
		entries, more, err := s.LockQueue(q.path, api.MaxLockQueue)
		if err != nil {
			return nil, err
		}
		resp := api.LockQueueResponse{Path: q.path, Index: s.Index(), Entries: entries, More: more}
		if d, ok := s.LockDelayOf(q.path); ok {
			resp.Delay = d.Info()
		}
		return resp, nil
	case lockCheckQuery:
		if err := s.CheckServes(q.path); err != nil {
			return nil, err
		}
		valid, holders := s.CheckToken(q.path, q.token)
		return api.LockCheckResponse{Valid: valid, Holders: holders, Index: s.Index()}, nil
	case cacheCheckQuery:
		return q.run(s), nil
	case statsQuery:
		return stats{index: s.Index(), epoch: s.Epoch(), sessions: s.NumSessions(), nodes: s.NumNodes(), tokenHeadroom: s.TokenHeadroom()}, nil
	}
	return nil, errors.New("cell: unknown query")
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
		if byTenant := c.watches.ArmedByTenant(tenant); byTenant+more > q && !brokenWatchQuota {
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
