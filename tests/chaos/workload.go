package chaos

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/sdk/fence"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// Paths the workloads use, all under the one cell's prefix.
const (
	cellName     = "demo"
	basePath     = "/demo/chaos"
	lockBase     = basePath + "/locks"
	sharedLock   = basePath + "/rw"
	electionPath = basePath + "/elect"
	takeoverLock = basePath + "/takeover"
	configBase   = basePath + "/config"
	churnBase    = basePath + "/churn"
	ackedBase    = basePath + "/acked"
	probeBase    = basePath + "/probe"
	quorumLock   = basePath + "/quorum-probe"
)

// maxIterations bounds every workload loop (they also end with the run).
const maxIterations = 10_000_000

// env is what the workloads share.
type env struct {
	h         *check.History
	res       *Resource
	cfg       Config
	endpoints []string
	epoch     uint64 // directory epoch of /demo: the high bits of its tokens
	proxies   bool   // lockproxies run: half the workers send through them
	// adminToken is the cluster's bootstrap admin token (the executor's
	// own clients: admin, final reads); tenantToken the workloads'
	// tenant's (write and lock on basePath).
	adminToken, tenantToken string
	ctx                     context.Context
	logf                    func(string, ...any)

	wg      sync.WaitGroup
	mu      sync.Mutex
	clients []*sdk.Client
	closed  bool // closeClients ran: no new clients

	// configCache counts the config workers' gets served from their
	// client cache (hits) and sent to the cell (misses): the
	// linearizability checker covers cached reads under faults.
	configCache struct{ hits, misses atomic.Uint64 }
}

// rng is a worker's own random stream, derived from the run's seed and the
// worker's name.
func (e *env) rng(name string) *rand.Rand {
	f := fnv.New64a()
	f.Write([]byte(name))
	return rand.New(rand.NewPCG(uint64(e.cfg.Seed), f.Sum64()))
}

// viaProxy says whether worker name sends through the proxies: half the
// workers do (by a hash of the name), the others and the executor's own
// clients (admin, observer, probes) go to the replicas.
func (e *env) viaProxy(name string) bool {
	if !e.proxies || name == "admin" || name == "observer" || strings.HasPrefix(name, "probe") {
		return false
	}
	f := fnv.New32a()
	f.Write([]byte(name))
	return f.Sum32()%2 == 0
}

// tokenFor is the API token worker name sends: the admin's for the
// executor's own client (cluster operations: move-prefix, replace-replica,
// the quorum probe), the workloads' tenant's for every other.
func (e *env) tokenFor(name string) string {
	if name == "admin" {
		return e.adminToken
	}
	return e.tenantToken
}

// newClient connects a client; with monitor, a goroutine follows its
// sessions' events (jeopardy counted, an expiry recorded as a loss).
func (e *env) newClient(name string, monitor bool, requestTimeout time.Duration) (*sdk.Client, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{
		Endpoints:      e.endpoints,
		RequestTimeout: requestTimeout,
		Logger:         slog.New(slog.DiscardHandler),
		Direct:         !e.viaProxy(name),
		AuthToken:      e.tokenFor(name),
	})
	if err != nil {
		return nil, fmt.Errorf("%s: connect: %w", name, err)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		_ = c.Close()
		return nil, fmt.Errorf("%s: the run is over", name)
	}
	e.clients = append(e.clients, c)
	e.mu.Unlock()
	if monitor {
		e.wg.Add(1)
		go e.monitor(name, c)
	}
	return c, nil
}

// monitor follows the client's sessions on the cell until the run ends.
func (e *env) monitor(name string, c *sdk.Client) {
	defer e.wg.Done()
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		ctx, cancel := context.WithTimeout(e.ctx, e.cfg.CallTimeout)
		s, err := c.Session(ctx, cellName)
		cancel()
		if err != nil {
			if errors.Is(err, sdk.ErrClosed) {
				return
			}
			sleepCtx(e.ctx, 100*time.Millisecond)
			continue
		}
		for ev := range s.Events() {
			switch ev.Type {
			case sdk.SessionJeopardy:
				e.h.AddJeopardy()
			case sdk.SessionExpired:
				if e.ctx.Err() == nil {
					e.h.AddLoss(check.SessionLoss{Worker: name, Session: s.ID(), At: e.h.Now(), Err: fmt.Sprint(ev.Err)})
				}
			}
		}
		if errors.Is(s.Err(), sdk.ErrClosed) && e.ctx.Err() != nil {
			return
		}
	}
}

func (e *env) closeClients() {
	e.mu.Lock()
	cs := e.clients
	e.clients, e.closed = nil, true
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { _ = c.Close() })
	}
	wg.Wait()
}

// callCtx bounds one call of a workload.
func (e *env) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, e.cfg.CallTimeout)
}

// notQuorum are calls that may succeed without asking the cell: a session
// the client already has, a client close with nothing left to close.
var notQuorum = map[string]bool{"session-open": true, "client-close": true}

// op runs and records one call.
func (e *env) op(worker, kind string, f func() error) error {
	start := e.h.Now()
	err := f()
	e.h.AddOp(check.Op{Worker: worker, Kind: kind, Start: start, End: e.h.Now(), OK: err == nil, Local: notQuorum[kind]})
	return err
}

func (e *env) goWorker(f func()) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func jitter(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

// lockWorker takes the lock at path (exclusive, or shared) over and over:
// TryLock; read its node (owner, create index) and lock state from the
// service; a few fenced writes to the resource while the lock's Context is
// live; the lock state again; Unlock.
func (e *env) lockWorker(name, path string, mode api.LockMode) {
	c, err := e.newClient(name, true, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	r := e.rng(name)
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		e.lockOnce(c, name, path, mode, r)
		sleepCtx(e.ctx, jitter(r, 0, e.cfg.Think))
	}
}

func (e *env) lockOnce(c *sdk.Client, name, path string, mode api.LockMode, r *rand.Rand) {
	ctx, cancel := e.callCtx()
	defer cancel()
	s0, err := c.Session(ctx, cellName)
	if err != nil {
		return
	}
	var opts []sdk.LockOption
	if mode == api.LockShared {
		opts = append(opts, sdk.Shared())
	}
	m := c.NewMutex(path, opts...)
	if err := e.op(name, "lock", func() error { return m.TryLock(ctx, e.cfg.LockWait) }); err != nil {
		return
	}
	at := e.h.Now()
	hold := e.newHolding(path, m.Node(), name, mode)
	hold.live(m.Context(), at)
	defer func() {
		hold.release()
		uctx, ucancel := e.callCtx()
		defer ucancel()
		_ = e.op(name, "unlock", func() error { return m.Unlock(uctx) })
	}()
	e.granted(c, name, path, mode, m.Node(), m.Token(), s0, r, hold, m.Context)
}

// holding records the periods during which one grant's Context was live,
// on the History's clock (check.Interval): from the grant's return, or
// from when a fresh Context (live again after jeopardy) was first seen,
// until it was cancelled (context.AfterFunc, which runs just after the
// cancel) or Unlock was called.
type holding struct {
	e    *env
	tmpl check.Interval

	mu    sync.Mutex
	seen  map[context.Context]bool
	spans []*liveSpan
}

type liveSpan struct {
	start time.Duration
	ended bool
	stop  func() bool
}

func (e *env) newHolding(lock, node, worker string, mode api.LockMode) *holding {
	return &holding{e: e, tmpl: check.Interval{Lock: lock, Node: node, Worker: worker, Mode: mode}, seen: map[context.Context]bool{}}
}

// live notes that the client is about to act under ctx (first seen at at);
// it reports whether ctx is live.
func (h *holding) live(ctx context.Context, at time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.seen[ctx] {
		h.seen[ctx] = true
		sp := &liveSpan{start: at}
		h.spans = append(h.spans, sp)
		sp.stop = context.AfterFunc(ctx, func() { h.end(sp) })
	}
	return true
}

func (h *holding) end(sp *liveSpan) {
	now := h.e.h.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if sp.ended {
		return
	}
	sp.ended = true
	iv := h.tmpl
	iv.Start, iv.End = sp.start, now
	h.e.h.AddInterval(iv)
}

// release ends every open span: the client is about to call Unlock.
func (h *holding) release() {
	h.mu.Lock()
	spans := h.spans
	h.mu.Unlock()
	for _, sp := range spans {
		sp.stop()
		h.end(sp)
	}
}

// granted is what every holder does with a grant (lock or election): check
// it with the service, record it, write under it, check it again. Like any
// client it acts on the SDK's word: a grant the service does not confirm is
// a violation, and its writes still go to the resource, where the fencing
// checker judges them. A grant whose node is already gone while the lock's
// Context is live is etcd #11456 (a grant reported after the session that
// owned the node ended): a violation, never a silent drop.
func (e *env) granted(c *sdk.Client, name, lock string, mode api.LockMode, node string, token uint64, s0 *sdk.Session, r *rand.Rand, hold *holding, live func() context.Context) {
	ctx, cancel := e.callCtx()
	defer cancel()
	s1, err := c.Session(ctx, cellName)
	if err != nil || s1.ID() != s0.ID() {
		return // the session changed under the grant: recorded as a loss by the monitor
	}
	var n api.Node
	if err := e.op(name, "get-node", func() (err error) { n, err = c.Get(ctx, node); return }); err != nil {
		if errors.Is(err, sdk.ErrNoNode) {
			e.goneAtGrant(name, node, live)
		}
		return
	}
	if exists, _, answered := e.checkHeld(c, name, lock, mode, node, "after grant"); !exists {
		e.goneAtGrant(name, node, live)
		return
	} else if !answered {
		// The fencing checker judges a write by what the service said of
		// its node; with no answer (a fault, or the run ending) there is
		// nothing to judge it by, so the holder does not write.
		e.logf("chaos: %s: no answer about %s after its grant; not writing under it", name, node)
		return
	}
	e.h.AddGrant(check.Grant{Lock: lock, Node: node, Mode: mode, Token: token, Session: s1.ID(), Owner: n.Owner,
		CreateIndex: n.CreateIndex, Epoch: e.epoch, Worker: name, At: hold.tmplStart()})
	writes := 1 + r.IntN(3)
	for w := 0; w < writes; w++ {
		lctx := live()
		if !hold.live(lctx, e.h.Now()) {
			break
		}
		kind, access := "fenced-write", e.res.Write
		if mode == api.LockShared {
			kind, access = "fenced-read", e.res.Read
		}
		start := e.h.Now()
		err := access(lock, token, s1.ID(), name, lctx)
		e.h.AddOp(check.Op{Worker: name, Kind: kind, Start: start, End: e.h.Now(), OK: err == nil, Local: true})
		if errors.Is(err, fence.ErrStaleToken) {
			e.logf("chaos: %s: holder of %s refused by the resource: %v", name, node, err)
		}
		sleepCtx(e.ctx, jitter(r, 2*time.Millisecond, 20*time.Millisecond))
	}
	e.checkHeld(c, name, lock, mode, node, "before release")
}

// setNode names the node once the holder learns it.
func (h *holding) setNode(node string) {
	h.mu.Lock()
	h.tmpl.Node = node
	h.mu.Unlock()
}

// tmplStart is when the grant returned.
func (h *holding) tmplStart() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.spans) > 0 {
		return h.spans[0].start
	}
	return h.e.h.Now()
}

// goneAtGrant judges a grant whose node the service says does not exist.
// If the lock's Context was cancelled by then, the lease ran out after the
// grant (the client stopped acting before the cell could delete the node):
// a loss, which the session monitor records. If it is still live, the SDK
// reported a grant on a node that was gone.
func (e *env) goneAtGrant(name, node string, live func() context.Context) {
	e.h.Checked("grant-confirmed")
	if live().Err() == nil {
		e.h.AddViolation("grant-confirmed", fmt.Sprintf("%s was granted %s but the service says the node does not exist while the lock's Context is live (etcd #11456)", name, node))
	}
}

// checkHeld asks the service about node and records what it said. A node
// that exists and waits right after the client was granted it is a
// violation (the library reported a grant the service does not agree
// with). exists is false only if the service said the node is gone.
// answered is false if the service could not be asked.
func (e *env) checkHeld(c *sdk.Client, name, lock string, mode api.LockMode, node, when string) (exists, held, answered bool) {
	ctx, cancel := e.callCtx()
	defer cancel()
	var st api.LockStateResponse
	if err := e.op(name, "lock-state", func() (err error) { st, _, err = c.LockState(ctx, node, false); return }); err != nil {
		return true, false, false
	}
	if !st.Exists {
		return false, false, true
	}
	e.h.AddLockObs(check.LockObs{Lock: lock, Node: node, Mode: mode, Index: st.Index, Held: st.Held, Source: "lockstate"})
	if when == "after grant" {
		e.h.Checked("grant-confirmed")
	}
	if !st.Held && when == "after grant" {
		e.h.AddViolation("grant-confirmed", fmt.Sprintf("%s was granted %s but the service says it waits for %s (index %d)", name, node, st.WaitFor, st.Index))
	}
	return true, st.Held, true
}

// electionWorker campaigns, leads for a moment (fenced writes with the
// leader's token), and resigns, over and over. While it leads, the
// service's Leader must be this candidate.
func (e *env) electionWorker(name string) {
	c, err := e.newClient(name, true, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	r := e.rng(name)
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		e.electOnce(c, name, r)
		sleepCtx(e.ctx, jitter(r, 0, e.cfg.Think))
	}
}

func (e *env) electOnce(c *sdk.Client, name string, r *rand.Rand) {
	ctx, cancel := e.callCtx()
	defer cancel()
	s0, err := c.Session(ctx, cellName)
	if err != nil {
		return
	}
	el := c.NewElection(electionPath)
	cctx, ccancel := context.WithTimeout(ctx, e.cfg.LockWait)
	err = e.op(name, "campaign", func() error { return el.Campaign(cctx, []byte(name)) })
	ccancel()
	if err != nil {
		return
	}
	at := e.h.Now()
	hold := e.newHolding(electionPath, "", name, api.LockExclusive)
	hold.live(el.Context(), at)
	defer func() {
		hold.release()
		rctx, rcancel := e.callCtx()
		defer rcancel()
		_ = e.op(name, "resign", func() error { return el.Resign(rctx) })
	}()
	token := el.Token()
	var li sdk.LeaderInfo
	if err := e.op(name, "leader", func() (err error) { li, err = el.Leader(ctx); return }); err != nil {
		return
	}
	e.h.Checked("election")
	if li.Token != token {
		if el.Context().Err() == nil {
			e.h.AddViolation("election", fmt.Sprintf("%s leads (token %d) but the service's leader is %s (token %d, value %q)", name, token, li.Node, li.Token, li.Value))
		}
		return
	}
	hold.setNode(li.Node)
	e.granted(c, name, electionPath, api.LockExclusive, li.Node, token, s0, r, hold, el.Context)
}

// configWorker runs gets, puts and compare-and-sets on a few config keys,
// recording each for the linearizability checker. Its session makes every
// write carry a request id, so retries across fail-overs are deduplicated.
func (e *env) configWorker(id int, name string, keys []string) {
	c, err := e.newClient(name, true, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	defer func() {
		st := c.CacheStats()
		e.configCache.hits.Add(st.Hits)
		e.configCache.misses.Add(st.Misses)
	}()
	r := e.rng(name)
	seen := map[string]uint64{}
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		ctx, cancel := e.callCtx()
		if _, err := c.Session(ctx, cellName); err != nil {
			cancel()
			sleepCtx(e.ctx, 100*time.Millisecond)
			continue
		}
		key := keys[r.IntN(len(keys))]
		op := e.configOnce(ctx, c, r, name, i, key, seen)
		op.Client = id
		cancel()
		e.h.AddConfig(op)
		sleepCtx(e.ctx, jitter(r, e.cfg.Think/4, e.cfg.Think))
	}
}

// configOnce runs one config get, put or compare-and-set on key and
// returns its record (the caller sets the client and records it).
func (e *env) configOnce(ctx context.Context, c *sdk.Client, r *rand.Rand, name string, i int, key string, seen map[string]uint64) check.ConfigOp {
	op := check.ConfigOp{Key: key, Call: e.h.Now()}
	var (
		n      api.Node
		err    error
		cached bool // answered from the client cache, with no call to the cell
	)
	switch p := r.IntN(10); {
	case p < 4:
		op.Kind = check.ConfigGet
		hits := c.CacheStats().Hits
		n, err = c.Get(ctx, key)
		cached = c.CacheStats().Hits > hits
	case p < 6:
		op.Kind = check.ConfigPut
		op.Value = fmt.Sprintf("%s-%d", name, i)
		n, err = c.Put(ctx, key, []byte(op.Value))
	default:
		op.Kind = check.ConfigCAS
		op.Value = fmt.Sprintf("%s-%d", name, i)
		op.Expect = seen[key]
		if r.IntN(5) == 0 && op.Expect > 0 {
			op.Expect-- // sometimes a stale expectation
		}
		n, err = c.CompareAndSet(ctx, key, []byte(op.Value), op.Expect)
	}
	op.Return = e.h.Now()
	if err != nil {
		op.Err = string(api.CodeOf(err))
	}
	switch {
	case err == nil:
		op.Outcome, op.Exists, op.Version = check.OutcomeOK, true, n.Version
		if op.Kind == check.ConfigGet {
			op.GotValue = string(n.Value)
		}
		seen[key] = n.Version
	case op.Kind == check.ConfigGet && errors.Is(err, sdk.ErrNoNode):
		op.Outcome, op.Exists = check.OutcomeOK, false
		seen[key] = 0
	case definite(err):
		op.Outcome = check.OutcomeFail
	default:
		op.Outcome = check.OutcomeUnknown
	}
	if op.Kind == check.ConfigGet && op.Outcome != check.OutcomeOK {
		op.Outcome = check.OutcomeFail
	}
	e.h.AddOp(check.Op{Worker: name, Kind: "config-" + string(op.Kind), Start: op.Call, End: op.Return, OK: err == nil, Local: cached})
	return op
}

// definite reports whether a failed write certainly did not take effect.
func definite(err error) bool {
	switch api.CodeOf(err) {
	case api.CodeVersionMismatch, api.CodeNodeExists, api.CodeNoNode, api.CodeBadRequest,
		api.CodeInvalidPath, api.CodeValueTooLarge, api.CodeWrongCell, api.CodeNotEmpty:
		return true
	}
	return false
}

// churnWorker opens a session, creates an ephemeral node on it, checks the
// service made the session its owner, closes the session and checks the
// node is gone; every few rounds it closes the whole client and connects
// a new one.
func (e *env) churnWorker(name string) {
	r := e.rng(name)
	var c *sdk.Client
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		if c == nil || i%5 == 0 {
			if c != nil {
				_ = e.op(name, "client-close", c.Close)
			}
			var err error
			if c, err = e.newClient(name, false, e.cfg.RequestTimeout); err != nil {
				return
			}
		}
		e.churnOnce(c, name, i)
		sleepCtx(e.ctx, jitter(r, e.cfg.Think/4, e.cfg.Think))
	}
}

func (e *env) churnOnce(c *sdk.Client, name string, i int) {
	ctx, cancel := e.callCtx()
	defer cancel()
	var s *sdk.Session
	if err := e.op(name, "session-open", func() (err error) { s, err = c.Session(ctx, cellName); return }); err != nil {
		return
	}
	path := fmt.Sprintf("%s/%s-%d", churnBase, name, i)
	var cr api.CreateResponse
	err := e.op(name, "create-ephemeral", func() (err error) {
		cr, err = c.Create(ctx, path, []byte(name), sdk.Ephemeral(), sdk.MakeParents())
		return
	})
	if err != nil {
		if api.CodeOf(err) == api.CodeSessionExpired && e.ctx.Err() == nil {
			e.h.AddLoss(check.SessionLoss{Worker: name, Session: s.ID(), At: e.h.Now(), Err: err.Error()})
		}
		_ = s.Close(ctx)
		return
	}
	e.h.Checked("session-churn")
	if cr.Node.Owner != s.ID() {
		e.h.AddViolation("session-churn", fmt.Sprintf("ephemeral %s created on session %d is owned by %d", path, s.ID(), cr.Node.Owner))
	}
	if err := e.op(name, "session-close", func() error { return s.Close(ctx) }); err != nil {
		return // outcome unknown
	}
	err = e.op(name, "get-closed", func() error {
		_, err := c.Get(ctx, path)
		if errors.Is(err, sdk.ErrNoNode) {
			return nil
		}
		if err == nil {
			return errStillExists
		}
		return err
	})
	if err == nil || errors.Is(err, errStillExists) {
		e.h.Checked("session-churn")
	}
	if errors.Is(err, errStillExists) {
		e.h.AddViolation("session-churn", fmt.Sprintf("ephemeral %s outlived the close of its session %d", path, s.ID()))
	}
}

var errStillExists = errors.New("node still exists")

// ackedWriter puts unique keys; every acknowledged one must read back at
// the end.
func (e *env) ackedWriter(name string) {
	c, err := e.newClient(name, true, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	r := e.rng(name)
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		ctx, cancel := e.callCtx()
		if _, err := c.Session(ctx, cellName); err != nil {
			cancel()
			sleepCtx(e.ctx, 100*time.Millisecond)
			continue
		}
		key := fmt.Sprintf("%s/%s-%d", ackedBase, name, i)
		value := fmt.Sprintf("%x", r.Uint64())
		err := e.op(name, "acked-put", func() error {
			_, err := c.Put(ctx, key, []byte(value), sdk.MakeParents())
			return err
		})
		cancel()
		if err == nil {
			e.h.AddAcked(check.AckedWrite{Key: key, Value: value})
		}
		sleepCtx(e.ctx, jitter(r, e.cfg.Think/4, e.cfg.Think))
	}
}

// observer lists the children of every lock path over and over and records
// the holders the lock rules give at the parent's child index: the
// service's own view of who held, independent of the clients.
func (e *env) observer(paths []string) {
	c, err := e.newClient("observer", false, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	last := map[string]uint64{}
	watched := map[string]bool{}
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		for _, p := range paths {
			ctx, cancel := e.callCtx()
			names, parent, err := c.Children(ctx, p)
			cancel()
			if err != nil || parent.ChildIndex == last[p] {
				continue
			}
			last[p] = parent.ChildIndex
			modes, held := check.HoldersOf(names)
			for name, mode := range modes {
				node := api.Join(p, name)
				e.h.AddLockObs(check.LockObs{Lock: p, Node: node, Mode: mode, Index: parent.ChildIndex, Held: held[name], Source: "children"})
				if !watched[node] {
					watched[node] = true
					e.goWorker(func() { e.watchDeletion(c, p, node) })
				}
			}
		}
		sleepCtx(e.ctx, e.cfg.ObservePeriod)
	}
}

// watchDeletion learns the Raft index at which node is deleted: a data
// watch's deleted event carries the index of the delete entry when it
// fires under the leader that armed it. After a fail-over the SDK
// re-registers the watch and the new leader fires it with its current
// index, a later one; such an event (the session's epoch changed between
// the arming read and the event) is not recorded, and the node's held span
// then ends at its last observation.
func (e *env) watchDeletion(c *sdk.Client, lock, node string) {
	for i := 0; i < 1000 && e.ctx.Err() == nil; i++ {
		ctx, cancel := e.callCtx()
		s, err := c.Session(ctx, cellName)
		if err != nil {
			cancel()
			return
		}
		epoch := s.Epoch()
		_, exists, ch, err := c.GetW(ctx, node)
		cancel()
		if err != nil || !exists {
			return
		}
		var ev api.Event
		select {
		case ev = <-ch:
		case <-e.ctx.Done():
			return
		}
		switch {
		case ev.Type == api.EventDeleted:
			if ev.Index > 0 && s.Err() == nil && s.Epoch() == epoch {
				e.h.AddDeletion(check.Deletion{Lock: lock, Node: node, Index: ev.Index})
			}
			return
		case ev.Type != api.EventDataChanged:
			return // the session ended, or a resync: unknown
		}
	}
}
