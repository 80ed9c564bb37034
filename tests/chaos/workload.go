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

	"github.com/lockservice/lockd/sdk"
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
// clients (admin, observer, probes: demo's and the moving prefix's) go to
// the replicas.
func (e *env) viaProxy(name string) bool {
	if !e.proxies || name == "admin" || name == "observer" || strings.HasPrefix(name, "probe") || strings.HasPrefix(name, "side-probe") {
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
					e.h.AddLoss(check.SessionLoss{Worker: name, Session: s.ID(), At: e.h.Now(), Err: fmt.Sprint(ev.Err) + lossDetail(s)})
				}
			}
		}
		if errors.Is(s.Err(), sdk.ErrClosed) && e.ctx.Err() != nil {
			return
		}
	}
}

// lossDetail is what the session's client saw of its KeepAlives, for a
// lost session's violation: when its lease was last confirmed, through
// which proxy, in which epoch, and how many KeepAlives failed.
func lossDetail(s *sdk.Session) string {
	st := s.Stats()
	last := "never"
	if !st.LastConfirmed.IsZero() {
		last = time.Since(st.LastConfirmed).Round(time.Millisecond).String() + " before"
	}
	proxy := st.Proxy
	if proxy == "" {
		proxy = "direct"
	}
	return fmt.Sprintf(" (client: last confirmed %s, %s, epoch %d, %d fail-overs seen, KeepAlives %d sent / %d failed, %d jeopardy episodes)",
		last, proxy, st.Epoch, st.Failovers, st.KeepAlivesSent, st.KeepAlivesFailed, st.JeopardyEpisodes)
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
