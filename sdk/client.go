package sdk

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/internal/mutant"
)

// Client is a connection to a lockd deployment: every cell in its
// directory. It is safe for concurrent use. Close it to end its sessions
// and stop its goroutines.
type Client struct {
	cfg     Config
	log     *slog.Logger
	timeout time.Duration

	bulk *transport // every call but KeepAlive
	ka   *transport // KeepAlives only
	// life watches attempts for a hung endpoint (liveness.go); probe is
	// the transport of its health probes.
	life  *liveness
	probe *transport

	seeds *cellState // Config.Endpoints, for directory loads
	dir   atomic.Pointer[routes]
	dirMu sync.Mutex // serialises directory refreshes
	// olderSince: since when every directory read has answered a map older
	// than the one held (zero: the last one did not); under dirMu.
	olderSince time.Time
	// unknownCells shares the directory reads for cells the view lacks
	// (dirrefresh.go); unmapped is the last prefix no map named.
	unknownCells dirRefresher
	unmapped     unmappedPrefix

	// ctx ends when Close starts: it stops keepalive loops, backoff sleeps
	// and waits for sessions.
	ctx    context.Context
	cancel context.CancelFunc
	closed atomic.Bool
	// bg counts every session goroutine, including those of sessions that
	// have ended and been replaced; Close waits for them.
	bg sync.WaitGroup

	mu    sync.Mutex
	slots map[string]*sessionSlot // by cell name

	cacheCount cacheCounters
	// keepAlivesSent counts the KeepAlive requests sent (every attempt).
	keepAlivesSent atomic.Uint64
	// wire remembers the endpoints that refused the binary encoding (wire.go).
	wire wireEndpoints
	// proxyStart is where in the directory's proxy list this client starts.
	proxyStart int

	// moves remembers, per prefix, a moved refusal while the directory
	// still names the refusing cell (the move is being committed): calls
	// go to the cell it named, which serves once the move commits.
	moves sync.Map // prefix → movedTo

	closeOnce sync.Once
	closeErr  error
}

// routes is an immutable snapshot of the directory (the prefix → cell
// map, package directory's, as lockd uses it) with the client's
// reachability state of each cell.
type routes struct {
	raw   api.DirectoryResponse
	dir   *directory.Directory
	cells map[string]*cellState // by name
	// directory reaches the directory group's replicas (administration).
	directory *cellState
}

// cellState is what the client knows about reaching one cell: its
// replicas and the last replica that answered as leader. It outlives
// directory refreshes.
type cellState struct {
	name string

	mu        sync.Mutex
	endpoints []string
	leader    string // last known leader; "" when unknown
	next      int    // rotation cursor into endpoints when leader is unknown
	// proxied: the endpoints are lockproxies, and a not_leader hint one
	// relays (a lockd's address) is not followed.
	proxied bool
}

func newCellState(name string, endpoints []string) *cellState {
	return &cellState{name: name, endpoints: slices.Clone(endpoints)}
}

// pick is the endpoint for the next attempt.
func (cs *cellState) pick() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.leader != "" {
		return cs.leader
	}
	if len(cs.endpoints) == 0 {
		return ""
	}
	return cs.endpoints[cs.next%len(cs.endpoints)]
}

// endpointList is a copy of the cell's endpoints.
func (cs *cellState) endpointList() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return slices.Clone(cs.endpoints)
}

// failed forgets addr as leader and moves the rotation past it.
func (cs *cellState) failed(addr string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.leader == addr {
		cs.leader = ""
	}
	if i := slices.Index(cs.endpoints, addr); i >= 0 {
		cs.next = i + 1
	} else {
		cs.next++
	}
}

// redirect records a not_leader reply from addr carrying hint. Through
// proxies a hint that is none of them (a lockd's address relayed by one)
// is not followed: it would take the client around the proxies, its
// KeepAlives reaching the leader one by one instead of in a proxy's
// batches. A direct client follows any hint: one outside its endpoints
// is a replica its directory does not list yet (a restored or replaced
// cell).
func (cs *cellState) redirect(addr, hint string) {
	cs.mu.Lock()
	around := cs.proxied && !slices.Contains(cs.endpoints, hint) && !mutant.On(mutant.ForeignHint)
	follow := hint != "" && hint != addr && !around
	if follow {
		cs.leader = hint
	}
	cs.mu.Unlock()
	if !follow {
		cs.failed(addr)
	}
}

// setProxied records whether the cell is reached through lockproxies.
func (cs *cellState) setProxied(proxied bool) {
	cs.mu.Lock()
	cs.proxied = proxied
	cs.mu.Unlock()
}

// isProxied reports whether the cell is reached through lockproxies.
func (cs *cellState) isProxied() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.proxied
}

// answered records that addr served a leader-only route.
func (cs *cellState) answered(addr string) {
	cs.mu.Lock()
	cs.leader = addr
	cs.mu.Unlock()
}

// setEndpoints installs the cell's replicas from a newer directory. A
// leader no longer among them (the cell was restored or its replicas
// replaced elsewhere) is forgotten: that lockd answers wrong_cell for the
// cell now, and pick would return it forever.
func (cs *cellState) setEndpoints(eps []string) {
	cs.mu.Lock()
	cs.endpoints = slices.Clone(eps)
	if cs.leader != "" && !slices.Contains(eps, cs.leader) {
		cs.leader = ""
	}
	cs.mu.Unlock()
}

// New connects to the deployment at cfg.Endpoints: it loads the directory,
// retrying until ctx ends. No session is opened until one is needed.
func New(ctx context.Context, cfg Config) (*Client, error) {
	var seeds []string
	for _, e := range cfg.Endpoints {
		for _, p := range strings.Split(e, ",") {
			if p = strings.TrimSpace(p); p != "" {
				seeds = append(seeds, p)
			}
		}
	}
	if len(seeds) == 0 {
		return nil, api.Errorf(api.CodeBadRequest, "sdk: no endpoints configured")
	}
	cfg.Endpoints = seeds
	c := &Client{
		cfg:        cfg,
		log:        cfg.logger(),
		timeout:    cfg.requestTimeout(),
		bulk:       newTransport("bulk", cfg.AuthToken, bulkMaxConns, cfg.TLS, cfg.Dial),
		ka:         newTransport("keepalive", cfg.AuthToken, keepAliveMaxConns, cfg.TLS, cfg.Dial),
		seeds:      newCellState("", seeds),
		slots:      make(map[string]*sessionSlot),
		proxyStart: rand.IntN(1 << 16),
	}
	c.life = newLiveness(cfg.hungAfter(), c.probeHealth)
	c.probe = newTransport("probe", "", maxProbeConns, cfg.TLS, cfg.Dial)
	c.probe.probes = true
	c.bulk.life, c.ka.life, c.probe.life = c.life, c.life, c.life
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.refreshDirectory(ctx, cfg.NoClusterAfter); err != nil {
		c.cancel()
		c.bulk.close()
		c.ka.close()
		c.probe.close()
		return nil, err
	}
	return c, nil
}

// RefreshDirectory reloads the prefix → cell map from any known replica.
// New loads it once; call this after a prefix has moved or a cell was
// added. Leader knowledge of cells that stay is kept.
func (c *Client) RefreshDirectory(ctx context.Context) error {
	return c.refreshDirectory(ctx, 0)
}

// refreshDirectory is RefreshDirectory, giving up with ErrNoCluster once
// every endpoint has refused connections for noClusterAfter (0: never).
func (c *Client) refreshDirectory(ctx context.Context, noClusterAfter time.Duration) error {
	c.dirMu.Lock()
	defer c.dirMu.Unlock()
	// Seeds first, then every replica the current directory knows of.
	if old := c.dir.Load(); old != nil {
		eps := slices.Clone(c.cfg.Endpoints)
		for _, cell := range old.raw.Cells {
			for _, e := range cell.Endpoints {
				if !slices.Contains(eps, e) {
					eps = append(eps, e)
				}
			}
		}
		c.seeds.setEndpoints(eps)
	}
	var resp api.DirectoryResponse
	if err := c.do(ctx, c.seeds, &call{method: "GET", route: api.RouteDirectory, resp: &resp, anyReplica: true, retryUnsure: true, noClusterAfter: noClusterAfter}); err != nil {
		return err
	}
	dir, err := directory.New(resp)
	if err != nil {
		return api.Errorf(api.CodeInternal, "the directory served is invalid: %v", err)
	}
	old := c.dir.Load()
	if !c.adoptable(old, resp.Index) {
		return nil
	}
	d := &routes{raw: resp, dir: dir, cells: make(map[string]*cellState)}
	proxies := c.proxyEndpoints(resp.Proxies)
	for _, cell := range resp.Cells {
		eps := cell.Endpoints
		if len(proxies) > 0 {
			eps = proxies
		}
		var cs *cellState
		if old != nil {
			cs = old.cells[cell.Name]
		}
		if cs == nil {
			cs = newCellState(cell.Name, eps)
		} else {
			cs.setEndpoints(eps)
		}
		cs.setProxied(len(proxies) > 0)
		d.cells[cell.Name] = cs
	}
	d.directory = newCellState("directory", resp.Directory.Endpoints)
	if old != nil && old.directory != nil {
		d.directory = old.directory
		d.directory.setEndpoints(resp.Directory.Endpoints)
	}
	c.dir.Store(d)
	// A moved refusal is only a hint while the directory still names the
	// cell that refused: once it names another, the directory wins.
	c.moves.Range(func(k, v any) bool {
		if p, ok := resp.Prefix(k.(string)); !ok || p.Cell != v.(movedTo).from {
			c.moves.Delete(k)
		}
		return true
	})
	return nil
}

// dirGoBackAfter is how long a client answered only maps older than its
// own keeps its own: past it the directory itself went back (a directory
// group rebuilt from a backup) and the client follows. A lockd without a
// directory replica lags by half a second.
const dirGoBackAfter = 10 * time.Second

// adoptable reports whether a map read at index may replace old (c.dirMu
// held). A lockd without a directory replica may answer its own view,
// which lags: a map older than the one held is not adopted (a prefix
// assigned a moment ago would vanish: wrong_cell) unless every read for
// dirGoBackAfter has answered one.
func (c *Client) adoptable(old *routes, index uint64) bool {
	if old == nil || index >= old.raw.Index || mutant.On(mutant.DirRegress) {
		c.olderSince = time.Time{}
		return true
	}
	now := time.Now()
	if c.olderSince.IsZero() {
		c.olderSince = now
	}
	if now.Sub(c.olderSince) < dirGoBackAfter {
		return false
	}
	c.olderSince = time.Time{}
	c.log.Warn("the directory went back; following it", "held_index", old.raw.Index, "read_index", index)
	return true
}

// proxyEndpoints is the order in which this client tries the proxies
// (none with Config.Direct): the list rotated by the client's own random
// start, so clients spread over the proxies and one client's cells share
// one.
func (c *Client) proxyEndpoints(proxies []api.ProxyInfo) []string {
	if c.cfg.Direct || len(proxies) == 0 {
		return nil
	}
	out := make([]string, 0, len(proxies))
	for i := range proxies {
		out = append(out, proxies[(i+c.proxyStart)%len(proxies)].APIAddr)
	}
	return out
}

// ViaProxies reports whether the client sends its calls through proxies.
func (c *Client) ViaProxies() bool {
	return len(c.proxyEndpoints(c.dir.Load().raw.Proxies)) > 0
}

// Directory returns the directory the client routes by.
func (c *Client) Directory() api.DirectoryResponse {
	return c.dir.Load().raw
}

// CellFor returns the name of the cell serving path, or a wrong_cell error
// if no cell in the directory serves its prefix.
func (c *Client) CellFor(path string) (string, error) {
	cs, err := c.cellForPath(path)
	if err != nil {
		return "", err
	}
	return cs.name, nil
}

func (c *Client) cellForPath(path string) (*cellState, error) {
	if err := api.ValidatePath(path); err != nil {
		return nil, err
	}
	d := c.dir.Load()
	cell, err := d.dir.CellFor(path)
	if err != nil {
		return nil, err
	}
	if v, ok := c.moves.Load(api.Prefix(path)); ok {
		if m := v.(movedTo); m.from == cell.Name && d.cells[m.to] != nil {
			return d.cells[m.to], nil
		}
	}
	return d.cells[cell.Name], nil
}

func (c *Client) cellByName(name string) (*cellState, error) {
	cs := c.dir.Load().cells[name]
	if cs == nil {
		return nil, api.Errorf(api.CodeWrongCell, "no cell named %q in the directory", name)
	}
	return cs, nil
}

// sessionSlot holds a cell's current session and makes concurrent callers
// share one open.
type sessionSlot struct {
	mu      sync.Mutex
	cur     *Session
	opening chan struct{} // non-nil while an open is in flight
}

// Session returns the client's live session on cell, opening one if there
// is none (the first, or because the last one expired or was closed).
func (c *Client) Session(ctx context.Context, cell string) (*Session, error) {
	cs, err := c.cellNamed(ctx, cell)
	if err != nil {
		return nil, err
	}
	return c.session(ctx, cs)
}

func (c *Client) slot(cell string) *sessionSlot {
	c.mu.Lock()
	defer c.mu.Unlock()
	sl := c.slots[cell]
	if sl == nil {
		sl = &sessionSlot{}
		c.slots[cell] = sl
	}
	return sl
}

// session returns the cell's live session, opening one if needed.
func (c *Client) session(ctx context.Context, cs *cellState) (*Session, error) {
	sl := c.slot(cs.name)
	for {
		if c.closed.Load() {
			return nil, ErrClosed
		}
		sl.mu.Lock()
		if s := sl.cur; s != nil && s.alive() {
			sl.mu.Unlock()
			return s, nil
		}
		if ch := sl.opening; ch != nil {
			sl.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, &gaveUpError{api.Errorf(api.CodeUnavailable, "waiting for a session on cell %s: %v", cs.name, ctx.Err()), ctx.Err()}
			}
		}
		ch := make(chan struct{})
		sl.opening = ch
		sl.mu.Unlock()

		s, err := c.openSession(ctx, cs)

		sl.mu.Lock()
		sl.opening = nil
		if err == nil {
			sl.cur = s
		}
		sl.mu.Unlock()
		close(ch)
		if err == nil && c.closed.Load() {
			// Close ran while we were opening and did not see s.
			_ = s.close(context.Background(), true)
			return nil, ErrClosed
		}
		return s, err
	}
}

// liveSession is the cell's session if one is live, else nil. It never opens one.
func (c *Client) liveSession(cs *cellState) *Session {
	c.mu.Lock()
	sl := c.slots[cs.name]
	c.mu.Unlock()
	if sl == nil {
		return nil
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.cur != nil && sl.cur.alive() {
		return sl.cur
	}
	return nil
}

// Close ends every session (telling each cell, bounded by the request
// timeout), fails their watches, stops all of the client's goroutines and
// closes its connections. Calls in flight return ErrClosed. Close is
// idempotent; it returns the errors of the session closes, if any.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.cancel()

		c.mu.Lock()
		var sessions []*Session
		for _, sl := range c.slots {
			sl.mu.Lock()
			if sl.cur != nil {
				sessions = append(sessions, sl.cur)
			}
			sl.mu.Unlock()
		}
		c.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), min(c.timeout, 3*time.Second))
		errs := make([]error, len(sessions))
		var wg sync.WaitGroup
		for i, s := range sessions {
			wg.Go(func() { errs[i] = s.close(ctx, true) })
		}
		wg.Wait()
		cancel()

		c.ka.close()
		c.bulk.close()
		c.probe.close()
		c.bg.Wait()
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}
