package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
	"github.com/lockservice/lockd/sdk"
)

// env is what every scenario runs against.
type env struct {
	endpoints []string
	lease     time.Duration
	duration  time.Duration
	run       string // unique per invocation, so runs never share paths
	progress  func(format string, args ...any)
	firstErr  atomic.Pointer[error] // the first failure of the run, for the report
	// profileDir, when set, receives a CPU profile of the demo leader per case.
	profileDir string
	exitFns    []func() // run when lockbench ends (a replica it restarted)
	// viaProxies sends the scenarios' SDK calls through the proxies.
	viaProxies bool
	// adminToken: the cluster requires tokens; the scenarios' clients act
	// as its admin, and flood makes its tenants with it.
	adminToken string
	// target is the system acquire, writes, herd and sessions measure.
	target target
}

// atExit runs f when the run ends.
func (e *env) atExit(f func()) { e.exitFns = append(e.exitFns, f) }

func (e *env) client(ctx context.Context) (*sdk.Client, error) {
	return sdk.New(ctx, e.config())
}

// config is the SDK configuration of every client a scenario opens as
// the admin: the run's endpoints, lease, route and token (a client made
// without it has no token on a cluster that requires one).
func (e *env) config() sdk.Config {
	return sdk.Config{Endpoints: e.endpoints, Lease: e.lease, Direct: !e.viaProxies, AuthToken: e.adminToken}
}

// clients opens n clients (each with its own sessions and connections).
func (e *env) clients(ctx context.Context, n int) ([]*sdk.Client, func(), error) {
	var cs []*sdk.Client
	closeAll := func() {
		for _, c := range cs {
			c.Close()
		}
	}
	for i := 0; i < n; i++ {
		c, err := e.client(ctx)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		cs = append(cs, c)
		// Open the session outside the measurement: the first call of a
		// client would otherwise carry it.
		for _, cell := range c.Directory().Cells {
			if _, err := c.Session(ctx, cell.Name); err != nil {
				closeAll()
				return nil, nil, err
			}
		}
	}
	return cs, closeAll, nil
}

// sessionClients opens n clients, each with a session on cell, 32 at a
// time (one by one, 50 000 opens would take minutes of commits before a
// measurement starts). onOpen, if set, gets each open's latency.
func (e *env) sessionClients(ctx context.Context, n int, cell string, onOpen func(time.Duration)) ([]*sdk.Client, func(), error) {
	clients := make([]*sdk.Client, n)
	closeAll := func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}
	var (
		next   atomic.Int64
		opened atomic.Int64
		first  atomic.Pointer[error]
		wg     sync.WaitGroup
	)
	for w := 0; w < min(32, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				c, err := e.client(ctx)
				if err == nil {
					clients[i] = c
					t0 := time.Now()
					if _, err = c.Session(ctx, cell); err == nil && onOpen != nil {
						onOpen(time.Since(t0))
					}
				}
				if err != nil {
					first.CompareAndSwap(nil, &err)
					next.Store(int64(n)) // stop the others
					return
				}
				if k := opened.Add(1); k%1000 == 0 {
					e.progress("%d/%d sessions open", k, n)
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		closeAll()
		return nil, nil, *p
	}
	if err := ctx.Err(); err != nil {
		closeAll()
		return nil, nil, err
	}
	return clients, closeAll, nil
}

// loop runs workers until the duration ends, each calling op repeatedly;
// op returns false to stop its worker.
func (e *env) loop(ctx context.Context, name string, workers int, rec *stats.Recorder, op func(ctx context.Context, worker, i int) error) time.Duration {
	defer e.profile(ctx, name)() // on the outer ctx: it ends just after the run
	ctx, cancel := context.WithTimeout(ctx, e.duration)
	defer cancel()
	start := time.Now()
	var done atomic.Int64
	stopProgress := e.tick(func() string {
		return fmt.Sprintf("%d ops, %.0f/s", done.Load(), float64(done.Load())/time.Since(start).Seconds())
	})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				t0 := time.Now()
				err := op(ctx, w, i)
				switch {
				case err == nil:
					rec.Add(time.Since(t0), time.Now())
					done.Add(1)
				case ctx.Err() != nil:
					return // cut off by the end of the run: not an error
				default:
					rec.Error()
					e.firstErr.CompareAndSwap(nil, &err)
				}
			}
		}(w)
	}
	wg.Wait()
	stopProgress()
	return time.Since(start)
}

// tick prints a progress line every second until stopped.
func (e *env) tick(line func() string) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				e.progress("%s", line())
			}
		}
	}()
	return func() { close(stop); <-done }
}

// acquire: Lock+Unlock at each concurrency on distinct fresh locks, then on
// one contended lock.
func acquire(ctx context.Context, e *env, concurrency []int) ([]report.Result, error) {
	var out []report.Result
	for _, contended := range []bool{false, true} {
		for _, c := range concurrency {
			if contended && c == 1 {
				continue // one worker cannot contend
			}
			cs, closeAll, err := e.target.lockers(ctx, min(c, 8), c)
			if err != nil {
				return out, err
			}
			rec := stats.NewRecorder(time.Now())
			base := fmt.Sprintf("/demo/lockbench/%s/acquire-%d-%v", e.run, c, contended)
			elapsed := e.loop(ctx, fmt.Sprintf("acquire %d %v", c, contended), c, rec, func(ctx context.Context, w, i int) error {
				path := base + "/one"
				if !contended {
					path = fmt.Sprintf("%s/w%d-%d", base, w, i)
				}
				unlock, err := cs[w].lock(ctx, path)
				if err != nil {
					return err
				}
				return unlock(context.WithoutCancel(ctx))
			})
			closeAll()
			kind := "distinct"
			if contended {
				kind = "one lock"
			}
			out = append(out, report.Result{Scenario: "acquire", Case: fmt.Sprintf("%d workers, %s", c, kind),
				Params:  map[string]string{"workers": strconv.Itoa(c), "locks": kind, "op": "Lock+Unlock"},
				Summary: rec.Summarise(elapsed)})
		}
	}
	return out, nil
}

// writes: the multi-Raft scaling curve. The writers put 100-byte values
// on the first prefix (one cell), then split evenly over the first 2, 4, 8
// … prefixes (one cell each in the dev cluster) and finally over all of
// them, reporting each cell and the sum at every step.
func writes(ctx context.Context, e *env, writers int, prefixes []string) ([]report.Result, error) {
	var out []report.Result
	for _, n := range scalingSteps(len(prefixes)) {
		res, err := writesOver(ctx, e, writers, prefixes[:n])
		out = append(out, res...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// scalingSteps is 1, 2, 4, … up to n, and n itself.
func scalingSteps(n int) []int {
	var steps []int
	for k := 1; k < n; k *= 2 {
		steps = append(steps, k)
	}
	return append(steps, n)
}

func writesOver(ctx context.Context, e *env, writers int, prefixes []string) ([]report.Result, error) {
	cs, closeAll, err := e.target.writers(ctx, min(writers, 16), writers)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	value := []byte(strings.Repeat("x", 100))
	all := stats.NewRecorder(time.Now())
	per := make([]*stats.Recorder, len(prefixes))
	for i := range per {
		per[i] = stats.NewRecorder(time.Now())
	}
	var mu sync.Mutex
	elapsed := e.loop(ctx, fmt.Sprintf("writes %d %d", writers, len(prefixes)), writers, all, func(ctx context.Context, w, i int) error {
		p := w % len(prefixes)
		t0 := time.Now()
		path := fmt.Sprintf("%s/lockbench/%s/writes/w%d", prefixes[p], e.run, w)
		err := cs[w].put(ctx, path, value)
		if err == nil {
			mu.Lock()
			per[p].Add(time.Since(t0), time.Now())
			mu.Unlock()
		}
		return err
	})
	var out []report.Result
	for i, p := range prefixes {
		out = append(out, report.Result{Scenario: "writes", Case: fmt.Sprintf("%d writers on %d cells: %s", writers/len(prefixes), len(prefixes), p),
			Params: map[string]string{"writers": strconv.Itoa(writers), "cells": strconv.Itoa(len(prefixes)), "prefix": p, "value_bytes": "100"}, Summary: per[i].Summarise(elapsed)})
	}
	if len(prefixes) > 1 {
		out = append(out, report.Result{Scenario: "writes", Case: fmt.Sprintf("%d writers, %d cells summed", writers, len(prefixes)),
			Params: map[string]string{"writers": strconv.Itoa(writers), "cells": strconv.Itoa(len(prefixes))}, Summary: all.Summarise(elapsed)})
	}
	return out, nil
}

// herd: contenders on one lock, each taking it in turn; the handoff is
// the time from one holder's release to the next grant. Watch events per
// release come from the cell's own counter.
func herd(ctx context.Context, e *env, contenders, handoffs int) ([]report.Result, error) {
	cs, closeAll, err := e.target.lockers(ctx, min(contenders, 16), contenders)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	eventsBefore, err := e.target.watchEvents(ctx)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, e.duration+time.Minute)
	defer cancel()
	h := &herdRun{e: e, path: fmt.Sprintf("/demo/lockbench/%s/herd", e.run), handoffs: handoffs, cancel: cancel, rec: stats.NewRecorder(time.Now())}
	start := time.Now()
	stopProgress := e.tick(func() string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return fmt.Sprintf("%d/%d handoffs", h.granted, handoffs)
	})
	var wg sync.WaitGroup
	for w := 0; w < contenders; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			h.contend(ctx, rctx, cs[w])
		}(w)
	}
	wg.Wait()
	stopProgress()
	elapsed := time.Since(start)
	if h.countErr != nil {
		return nil, h.countErr
	}
	s := h.rec.Summarise(elapsed)
	extra := map[string]float64{}
	if s.N > 0 && h.eventsAfter > 0 {
		extra["events_per_release"] = (h.eventsAfter - eventsBefore) / float64(s.N) // s.N releases preceded the last grant
	}
	return []report.Result{{Scenario: "herd", Case: fmt.Sprintf("%d contenders, one lock", contenders),
		Params: map[string]string{"contenders": strconv.Itoa(contenders), "handoffs": strconv.Itoa(handoffs)}, Summary: s, Extra: extra}}, nil
}

// herdRun is the herd's one lock and what its contenders share: the last
// release, the grants so far, the handoffs recorded, and the watch events
// counted at the last grant.
type herdRun struct {
	e        *env
	path     string
	handoffs int
	cancel   context.CancelFunc // ends the run after the last handoff
	rec      *stats.Recorder

	mu          sync.Mutex
	released    time.Time
	granted     int
	eventsAfter float64
	countErr    error
}

// contend takes the lock with l, holds it briefly and releases it, until
// the run ends; the contender granted after the last handoff ends it.
func (h *herdRun) contend(ctx, rctx context.Context, l locker) {
	for rctx.Err() == nil {
		unlock, err := l.lock(rctx, h.path)
		if err != nil {
			return
		}
		h.mu.Lock()
		if !h.released.IsZero() {
			h.rec.Add(time.Since(h.released), time.Now())
		}
		h.granted++
		last := h.granted > h.handoffs
		h.mu.Unlock()
		if last {
			// Count events now: the give-ups of the waiters left
			// when the run ends fire events that are no handoff's.
			h.eventsAfter, h.countErr = h.e.target.watchEvents(ctx)
		}
		time.Sleep(time.Millisecond) // hold briefly
		h.mu.Lock()
		h.released = time.Now()
		h.mu.Unlock()
		_ = unlock(context.WithoutCancel(rctx))
		if last {
			h.cancel()
			return
		}
	}
}

// metricSum adds up a counter over every replica's /metrics (only the
// leader's moves for leader-only counters).
func metricSum(ctx context.Context, endpoints []string, name, label string) (float64, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	var sum float64
	for _, ep := range endpoints {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+ep+api.RouteMetrics, nil)
		if err != nil {
			return 0, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			continue // a replica down counts nothing
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
				continue
			}
			f := strings.Fields(line)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				sum += v
			}
		}
		resp.Body.Close()
	}
	return sum, nil
}

// sessionsScenario holds n sessions on the demo cell for the run's duration
// and measures what they cost: KeepAlives per second at the cell, CPU and
// RSS per replica (when lockbench started the cluster and knows its
// processes), and false expiries, which must be 0.
func sessionsScenario(ctx context.Context, e *env, n int, procs []int) ([]report.Result, error) {
	rec := stats.NewRecorder(time.Now())
	var mu sync.Mutex
	sessions, closeAll, err := e.target.sessions(ctx, n, func(d time.Duration) {
		mu.Lock()
		rec.Add(d, time.Now())
		mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	defer closeAll()
	kaBefore, err := e.target.keepAlives(ctx)
	if err != nil {
		return nil, err
	}
	cpuBefore := cpuTimes(procs)
	waitProfile := e.profile(ctx, fmt.Sprintf("sessions %d", n))
	start := time.Now()
	stop := e.tick(func() string { return fmt.Sprintf("%d sessions held for %v", n, time.Since(start).Round(time.Second)) })
	select {
	case <-ctx.Done():
	case <-time.After(e.duration):
	}
	stop()
	elapsed := time.Since(start)
	waitProfile()
	kaAfter, err := e.target.keepAlives(ctx)
	if err != nil {
		return nil, err
	}
	lost := 0
	for _, s := range sessions {
		if s.lost() {
			lost++
		}
	}
	extra := map[string]float64{
		"keepalives_per_s": (kaAfter - kaBefore) / elapsed.Seconds(),
		"false_expiries":   float64(lost),
	}
	cpuAfter := cpuTimes(procs)
	for i, pid := range procs {
		if cpuBefore[i] >= 0 && cpuAfter[i] >= 0 {
			extra[fmt.Sprintf("cpu_pct_replica%d", i+1)] = 100 * (cpuAfter[i] - cpuBefore[i]) / elapsed.Seconds()
		}
		if rss := rssMB(pid); rss > 0 {
			extra[fmt.Sprintf("rss_mb_replica%d", i+1)] = rss
		}
	}
	return []report.Result{{Scenario: "sessions", Case: fmt.Sprintf("%d sessions held %v (open latency)", n, e.duration),
		Params: map[string]string{"sessions": strconv.Itoa(n), "lease": e.lease.String()}, Summary: rec.Summarise(elapsed), Extra: extra}}, nil
}
