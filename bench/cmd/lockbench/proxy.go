package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
	"github.com/lockservice/lockd/sdk"
)

// proxyScenario measures the proxy tier: for each session count, the
// KeepAlive RPCs and CPU the demo cell's leader spends renewing that many
// sessions held through the proxies (target: one batch per proxy per
// second, whatever the count; 100 000 sessions under 25 % of a core; no
// false expiry); then Lock+Unlock through a proxy against direct.
func proxyScenario(ctx context.Context, e *env, counts []int, procs []int) ([]report.Result, error) {
	c, err := sdk.New(ctx, sdk.Config{Endpoints: e.endpoints, Direct: true})
	if err != nil {
		return nil, err
	}
	proxies := c.Directory().Proxies
	c.Close()
	if len(proxies) == 0 {
		return nil, fmt.Errorf("the directory lists no lockproxy (lockbench --start runs --proxies 2)")
	}
	var out []report.Result
	for _, n := range counts {
		res, err := proxySessions(ctx, e, proxies, n, procs)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	for _, via := range []bool{false, true} {
		for _, workers := range []int{1, 32} {
			res, err := proxyAcquire(ctx, e, via, workers)
			if err != nil {
				return out, err
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// sessionSim speaks the client API for many sessions over a few
// connections per proxy, as that many client processes would: it opens
// them, sends each a KeepAlive every lease/3 (wait 0: the proxy answers
// from its last confirmed batch) and closes them.
type sessionSim struct {
	e       *env
	proxies []*fasthttp.HostClient
	// ids are the sessions, 0 until opened; gone marks those that ended.
	ids []atomic.Uint64
	// secrets[i] is written before ids[i] is stored, read after it is loaded.
	secrets []string
	gone    []atomic.Bool
	// lastOK is when each session's last confirmed KeepAlive was sent
	// (unix ns): an expiry with a gap under the lease is false, one after
	// a longer gap is the simulator falling behind (CPU-starved).
	lastOK []atomic.Int64
	late   atomic.Int64
	errMsg atomic.Pointer[string]

	falseExpiries atomic.Int64
	kaOK          atomic.Int64
	kaErrors      atomic.Int64
	maxLeaseAge   atomic.Int64
}

func newSessionSim(e *env, proxies []api.ProxyInfo, n int) *sessionSim {
	s := &sessionSim{e: e, ids: make([]atomic.Uint64, n), secrets: make([]string, n), gone: make([]atomic.Bool, n), lastOK: make([]atomic.Int64, n)}
	for _, p := range proxies {
		s.proxies = append(s.proxies, &fasthttp.HostClient{Addr: p.APIAddr, MaxConns: 1024, MaxConnWaitTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 10 * time.Second})
	}
	return s
}

func (s *sessionSim) post(i int, route string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	rq, rs := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(rq)
	defer fasthttp.ReleaseResponse(rs)
	hc := s.proxies[i%len(s.proxies)]
	rq.SetRequestURI("http://" + hc.Addr + route)
	rq.Header.SetMethod(fasthttp.MethodPost)
	rq.Header.Set(api.HeaderCell, "demo")
	rq.SetBody(body)
	if err := hc.DoTimeout(rq, rs, 20*time.Second); err != nil {
		return api.Errorf(api.CodeUnavailable, "%s: %v", hc.Addr, err)
	}
	if rs.StatusCode() != 200 {
		var er api.ErrorResponse
		if json.Unmarshal(rs.Body(), &er) == nil && er.Error != nil {
			return er.Error
		}
		return api.Errorf(api.CodeInternal, "HTTP %d", rs.StatusCode())
	}
	if resp != nil {
		return json.Unmarshal(rs.Body(), resp)
	}
	return nil
}

// each runs f for every session index on 256 workers, retrying what a
// proxy answers unavailable.
func (s *sessionSim) each(ctx context.Context, what string, f func(i int) error) error {
	var (
		next  atomic.Int64
		done  atomic.Int64
		first atomic.Pointer[error]
		wg    sync.WaitGroup
	)
	for w := 0; w < 256; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && first.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(s.ids) {
					return
				}
				var err error
				for attempt := 0; attempt < 20; attempt++ {
					if err = f(i); api.CodeOf(err) != api.CodeUnavailable {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				if k := done.Add(1); k%10_000 == 0 {
					s.e.progress("%d/%d sessions %s", k, len(s.ids), what)
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return ctx.Err()
}

// keepAlives sends every session a KeepAlive every interval, each at its
// own offset, until ctx ends.
func (s *sessionSim) keepAlives(ctx context.Context, interval time.Duration, rec *stats.Recorder) {
	const workers = 1024
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; ; round++ {
				for i := w; i < len(s.ids); i += workers {
					at := start.Add(time.Duration(round)*interval + time.Duration(int64(interval)*int64(i)/int64(len(s.ids))))
					if d := time.Until(at); d > 0 {
						select {
						case <-ctx.Done():
							return
						case <-time.After(d):
						}
					}
					if ctx.Err() != nil {
						return
					}
					id := s.ids[i].Load()
					if id == 0 || s.gone[i].Load() {
						continue // not open yet, or ended
					}
					t0 := time.Now()
					var resp api.SessionResponse
					err := s.post(i, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "demo", Session: id, Secret: s.secrets[i]}, &resp)
					switch code := api.CodeOf(err); {
					case err == nil:
						s.kaOK.Add(1)
						s.lastOK[i].Store(t0.UnixNano())
						mu.Lock()
						rec.Add(time.Since(t0), time.Now())
						mu.Unlock()
						for age := s.maxLeaseAge.Load(); resp.LeaseAgeMS > age && !s.maxLeaseAge.CompareAndSwap(age, resp.LeaseAgeMS); age = s.maxLeaseAge.Load() {
						}
					case code == api.CodeSessionExpired || code == api.CodeNoSession:
						if gap := t0.Sub(time.Unix(0, s.lastOK[i].Load())); gap < s.e.lease {
							s.falseExpiries.Add(1)
						} else {
							s.late.Add(1)
						}
						s.gone[i].Store(true)
					default:
						s.kaErrors.Add(1)
						msg := err.Error()
						s.errMsg.CompareAndSwap(nil, &msg)
						mu.Lock()
						rec.Error()
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
}

// proxySessions is one case of proxyScenario: n sessions renewed through
// the proxies for at least two leases.
func proxySessions(ctx context.Context, e *env, proxies []api.ProxyInfo, n int, procs []int) (report.Result, error) {
	sim := newSessionSim(e, proxies, n)
	// KeepAlives run from the start: a session gets its first one within
	// lease/3 of its open, as a client's would.
	kaCtx, stopKA := context.WithCancel(ctx)
	kaRec := stats.NewRecorder(time.Now())
	kaDone := make(chan struct{})
	go func() { sim.keepAlives(kaCtx, e.lease/3, kaRec); close(kaDone) }()
	defer func() { stopKA(); <-kaDone }()
	openRec := stats.NewRecorder(time.Now())
	var mu sync.Mutex
	openStart := time.Now()
	err := sim.each(ctx, "open", func(i int) error {
		var resp api.SessionResponse
		t0 := time.Now()
		if err := sim.post(i, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo", LeaseMS: e.lease.Milliseconds(), Nonce: fmt.Sprintf("%s-%d", e.run, i)}, &resp); err != nil {
			return err
		}
		sim.lastOK[i].Store(t0.UnixNano())
		sim.secrets[i] = resp.Secret
		sim.ids[i].Store(resp.Session)
		mu.Lock()
		openRec.Add(time.Since(t0), time.Now())
		mu.Unlock()
		return nil
	})
	if err != nil {
		return report.Result{}, fmt.Errorf("open %d sessions: %w", n, err)
	}
	e.progress("%d sessions opened in %v", n, time.Since(openStart).Round(time.Second))
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		_ = sim.each(cctx, "closed", func(i int) error {
			id := sim.ids[i].Load()
			if id == 0 || !sim.gone[i].CompareAndSwap(false, true) {
				return nil
			}
			err := sim.post(i, api.RouteSessionClose, api.CloseSessionRequest{Cell: "demo", Session: id, Secret: sim.secrets[i]}, nil)
			if c := api.CodeOf(err); c == api.CodeSessionExpired || c == api.CodeNoSession {
				return nil
			}
			return err
		})
	}()

	// Let the KeepAlives settle into their schedule before measuring.
	select {
	case <-ctx.Done():
		return report.Result{}, ctx.Err()
	case <-time.After(e.lease / 2):
	}

	leader, err := leaderIndex(ctx, e.endpoints, "demo")
	if err != nil {
		return report.Result{}, err
	}
	metric := func(name string) float64 {
		v, _ := metricSum(ctx, e.endpoints[leader:leader+1], name, `cell="demo"`)
		return v
	}
	kaBefore, batchesBefore, renewedBefore := metric("lockd_keepalives_total"), metric("lockd_keepalive_batches_total"), metric("lockd_keepalive_batched_sessions_total")
	var leaderPID []int
	if leader < len(procs) {
		leaderPID = procs[leader : leader+1]
	}
	proxyPIDs := proxyProcesses(procs)
	cpuBefore, proxyCPUBefore := cpuTimes(leaderPID), cpuTimes(proxyPIDs)
	kaOKBefore, kaErrBefore := sim.kaOK.Load(), sim.kaErrors.Load()
	measure := max(e.duration, 2*e.lease)
	waitProfile := e.profile(ctx, fmt.Sprintf("proxy %d sessions", n))
	start := time.Now()
	stop := e.tick(func() string {
		return fmt.Sprintf("%d sessions renewed through %d proxies for %v", n, len(proxies), time.Since(start).Round(time.Second))
	})
	select {
	case <-ctx.Done():
	case <-time.After(measure):
	}
	stop()
	elapsed := time.Since(start)
	waitProfile()
	ka, batches, renewed := metric("lockd_keepalives_total")-kaBefore, metric("lockd_keepalive_batches_total")-batchesBefore, metric("lockd_keepalive_batched_sessions_total")-renewedBefore
	cpuAfter, proxyCPUAfter := cpuTimes(leaderPID), cpuTimes(proxyPIDs)

	extra := map[string]float64{
		"leader_keepalive_rpcs_per_s":  (ka + batches) / elapsed.Seconds(),
		"leader_batches_per_s":         batches / elapsed.Seconds(),
		"leader_client_keepalives":     ka,
		"renewals_per_s":               renewed / elapsed.Seconds(),
		"client_keepalives_per_s":      float64(sim.kaOK.Load()-kaOKBefore) / elapsed.Seconds(),
		"false_expiries":               float64(sim.falseExpiries.Load()), // since the first open
		"expired_after_late_keepalive": float64(sim.late.Load()),
		"keepalive_errors":             float64(sim.kaErrors.Load() - kaErrBefore),
		"max_lease_age_ms":             float64(sim.maxLeaseAge.Load()),
		"open_p99_ms":                  openRec.Summarise(time.Since(openStart)).P99,
	}
	if len(cpuBefore) == 1 && cpuBefore[0] >= 0 && cpuAfter[0] >= 0 {
		extra["leader_cpu_pct"] = 100 * (cpuAfter[0] - cpuBefore[0]) / elapsed.Seconds()
	}
	for i := range proxyPIDs {
		if proxyCPUBefore[i] >= 0 && proxyCPUAfter[i] >= 0 {
			extra[fmt.Sprintf("proxy%d_cpu_pct", i+1)] = 100 * (proxyCPUAfter[i] - proxyCPUBefore[i]) / elapsed.Seconds()
		}
	}
	params := map[string]string{"sessions": strconv.Itoa(n), "proxies": strconv.Itoa(len(proxies)), "lease": e.lease.String()}
	if m := sim.errMsg.Load(); m != nil {
		params["first_keepalive_error"] = *m
	}
	return report.Result{Scenario: "proxy", Case: fmt.Sprintf("%d sessions via %d proxies (client KeepAlive latency)", n, len(proxies)),
		Params: params, Summary: kaRec.Summarise(elapsed), Extra: extra}, nil
}

// proxyAcquire is Lock+Unlock on distinct fresh locks, direct or through
// the proxies.
func proxyAcquire(ctx context.Context, e *env, via bool, workers int) (report.Result, error) {
	saved := e.viaProxies
	e.viaProxies = via
	cs, closeAll, err := e.clients(ctx, min(workers, 8))
	e.viaProxies = saved
	if err != nil {
		return report.Result{}, err
	}
	defer closeAll()
	route := "direct"
	if via {
		route = "via proxy"
	}
	rec := stats.NewRecorder(time.Now())
	base := fmt.Sprintf("/demo/lockbench/%s/proxy-acquire-%v-%d", e.run, via, workers)
	elapsed := e.loop(ctx, fmt.Sprintf("acquire %s %d", route, workers), workers, rec, func(ctx context.Context, w, i int) error {
		m := cs[w%len(cs)].NewMutex(fmt.Sprintf("%s/w%d-%d", base, w, i))
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(context.WithoutCancel(ctx))
	})
	return report.Result{Scenario: "proxy", Case: fmt.Sprintf("Lock+Unlock %s, %d workers", route, workers),
		Params: map[string]string{"route": route, "workers": strconv.Itoa(workers), "op": "Lock+Unlock"}, Summary: rec.Summarise(elapsed)}, nil
}

// proxyProcesses are the lockproxy processes of the `lockd dev` whose
// replicas are procs (its children started with --name), in name order.
func proxyProcesses(procs []int) []int {
	if len(procs) == 0 || procs[0] == 0 {
		return nil
	}
	f, ok := statFields(procs[0])
	if !ok || len(f) < 2 {
		return nil
	}
	dev, err := strconv.Atoi(f[1])
	if err != nil {
		return nil
	}
	type named struct {
		name string
		pid  int
	}
	var found []named
	for _, pid := range childPIDs(dev) {
		args, err := cmdline(pid)
		if err != nil {
			continue
		}
		if i := slices.Index(args, "--name"); i >= 0 && i+1 < len(args) {
			found = append(found, named{args[i+1], pid})
		}
	}
	slices.SortFunc(found, func(a, b named) int {
		if a.name < b.name {
			return -1
		}
		return 1
	})
	var out []int
	for _, n := range found {
		out = append(out, n.pid)
	}
	return out
}
