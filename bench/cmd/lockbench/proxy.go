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
// once the batch that carries it is confirmed, or after about lease/6
// with the age of the lease it last confirmed) and closes them.
type sessionSim struct {
	e       *env
	proxies []*fasthttp.HostClient
	// ids are the sessions, 0 until opened; gone marks those that ended.
	ids []atomic.Uint64
	// secrets[i] is written before ids[i] is stored, read after it is loaded.
	secrets []string
	gone    []atomic.Bool
	// leaseFrom is, per session, the send its lease is confirmed from
	// (unix ns), as the sdk dates it (confirmedSend): the open's send,
	// then each successful KeepAlive's send less the lease's age its
	// reply gives (a reply sent before its batch was confirmed dates the
	// lease from an earlier KeepAlive, a lease or more back when the
	// simulator fell behind). An expiry the simulator hears of before
	// leaseFrom + lease is false; one after is the simulator's KeepAlive
	// coming too late.
	leaseFrom []atomic.Int64
	late      atomic.Int64
	errMsg    atomic.Pointer[string]

	falseExpiries atomic.Int64
	kaOK          atomic.Int64
	kaErrors      atomic.Int64
	maxLeaseAge   atomic.Int64
}

func newSessionSim(e *env, proxies []api.ProxyInfo, n int) *sessionSim {
	s := &sessionSim{e: e, ids: make([]atomic.Uint64, n), secrets: make([]string, n), gone: make([]atomic.Bool, n), leaseFrom: make([]atomic.Int64, n)}
	for _, p := range proxies {
		// A connection for each KeepAlive worker (each holds one
		// KeepAlive at a time), spread over the proxies.
		conns := max(1024, keepAliveWorkers(n)/len(proxies)+256)
		s.proxies = append(s.proxies, &fasthttp.HostClient{Addr: p.APIAddr, MaxConns: conns, MaxConnWaitTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 10 * time.Second})
	}
	return s
}

func (s *sessionSim) post(i int, route string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return s.exchange(i, route, body, "", func(b []byte) error {
		if resp == nil {
			return nil
		}
		return json.Unmarshal(b, resp)
	})
}

// keepAlive sends session i's KeepAlive in the binary encoding, as the
// SDK does (api.ContentTypeWire).
func (s *sessionSim) keepAlive(i int, req api.KeepAliveRequest, resp *api.SessionResponse) error {
	return s.exchange(i, api.RouteSessionKeepAlive, req.AppendWire(nil), api.ContentTypeWire, resp.UnmarshalWire)
}

// exchange posts body (JSON unless contentType says) to session i's proxy
// and hands a 200's body to decode; any other status is the error it
// carries.
func (s *sessionSim) exchange(i int, route string, body []byte, contentType string, decode func([]byte) error) error {
	rq, rs := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(rq)
	defer fasthttp.ReleaseResponse(rs)
	hc := s.proxies[i%len(s.proxies)]
	rq.SetRequestURI("http://" + hc.Addr + route)
	rq.Header.SetMethod(fasthttp.MethodPost)
	rq.Header.Set(api.HeaderCell, "demo")
	if contentType != "" {
		rq.Header.SetContentType(contentType)
	}
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
	return decode(rs.Body())
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

// maxKeepAliveWorkers bounds the goroutines sending the simulated
// sessions' KeepAlives (each holds one KeepAlive, and one connection, at
// a time). The proxy holds a wait-0 KeepAlive until the batch carrying it
// is confirmed, up to about lease/6 (1.9 s of a 12 s lease), so a worker
// keeps its sessions on their lease/3 schedule only with about two
// sessions or fewer: 1 024 workers sent 10 000 sessions' KeepAlives every
// 17 s or so, over the lease. At 100 000 sessions 8 192 still fall behind
// (the simulator's file descriptors bound them).
const maxKeepAliveWorkers = 8192

// keepAliveWorkers is how many goroutines send n sessions' KeepAlives:
// one per session up to the bound. A worker with no session of its own
// would loop without ever waiting (it spun a core when n < 1024).
func keepAliveWorkers(n int) int { return min(max(n, 0), maxKeepAliveWorkers) }

// keepAlives sends every session a KeepAlive every interval, each at its
// own offset, until ctx ends.
func (s *sessionSim) keepAlives(ctx context.Context, interval time.Duration, rec *stats.Recorder) {
	workers := keepAliveWorkers(len(s.ids))
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; ctx.Err() == nil; round++ { // until the run ends
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
					err := s.keepAlive(i, api.KeepAliveRequest{Cell: "demo", Session: id, Secret: s.secrets[i]}, &resp)
					switch code := api.CodeOf(err); {
					case err == nil:
						s.kaOK.Add(1)
						s.renewed(i, confirmedFrom(t0, resp.LeaseAgeMS))
						mu.Lock()
						rec.Add(time.Since(t0), time.Now())
						mu.Unlock()
						for age := s.maxLeaseAge.Load(); resp.LeaseAgeMS > age && !s.maxLeaseAge.CompareAndSwap(age, resp.LeaseAgeMS); age = s.maxLeaseAge.Load() {
						}
					case code == api.CodeSessionExpired || code == api.CodeNoSession:
						if falseExpiry(time.Unix(0, s.leaseFrom[i].Load()), s.e.lease, time.Now()) {
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

// confirmedFrom is the send a KeepAlive reply confirms the lease from:
// sentAt less the lease's age the reply gives (sdk's confirmedSend).
func confirmedFrom(sentAt time.Time, leaseAgeMS int64) time.Time {
	return sentAt.Add(-time.Duration(max(leaseAgeMS, 0)) * time.Millisecond)
}

// renewed records that session i's lease is confirmed from from (never
// moving it back).
func (s *sessionSim) renewed(i int, from time.Time) {
	for cur := s.leaseFrom[i].Load(); from.UnixNano() > cur && !s.leaseFrom[i].CompareAndSwap(cur, from.UnixNano()); cur = s.leaseFrom[i].Load() {
	}
}

// falseExpiry reports whether an expiry the simulator heard of at told is
// false: its lease, confirmed from leaseFrom, still ran then. Judged by
// when the verdict came, not by when the KeepAlive that got it was sent:
// one sent in a lease's last second or two cannot reach the leader in a
// batch before the lease ends.
func falseExpiry(leaseFrom time.Time, lease time.Duration, told time.Time) bool {
	return told.Before(leaseFrom.Add(lease))
}

// proxySessions is one case of proxyScenario: n sessions renewed through
// the proxies for at least two leases.
func proxySessions(ctx context.Context, e *env, proxies []api.ProxyInfo, n int, procs []int) (report.Result, error) {
	sim := newSessionSim(e, proxies, n)
	// KeepAlives run from the start: a session gets its first one within
	// lease/3 of its open, as a client's would.
	kaRec, stopKA := sim.startKeepAlives(ctx)
	defer stopKA()
	openRec, openStart := stats.NewRecorder(time.Now()), time.Now()
	if err := sim.openAll(ctx, openRec); err != nil {
		return report.Result{}, fmt.Errorf("open %d sessions: %w", n, err)
	}
	e.progress("%d sessions opened in %v", n, time.Since(openStart).Round(time.Second))
	defer sim.closeAll(ctx)

	// Let the KeepAlives settle into their schedule before measuring.
	select {
	case <-ctx.Done():
		return report.Result{}, ctx.Err()
	case <-time.After(e.lease / 2):
	}

	load, err := sim.measureLeader(ctx, procs)
	if err != nil {
		return report.Result{}, err
	}
	return sim.result(load, kaRec, openRec.Summarise(time.Since(openStart)).P99), nil
}

// startKeepAlives starts the KeepAlives, recorded in rec; stop ends them
// and waits.
func (s *sessionSim) startKeepAlives(ctx context.Context) (rec *stats.Recorder, stop func()) {
	kaCtx, stopKA := context.WithCancel(ctx)
	kaRec := stats.NewRecorder(time.Now())
	kaDone := make(chan struct{})
	go func() { s.keepAlives(kaCtx, s.e.lease/3, kaRec); close(kaDone) }()
	return kaRec, func() { stopKA(); <-kaDone }
}

// openAll opens every session, recording each open in rec.
func (s *sessionSim) openAll(ctx context.Context, rec *stats.Recorder) error {
	var mu sync.Mutex
	return s.each(ctx, "open", func(i int) error {
		var resp api.SessionResponse
		t0 := time.Now()
		if err := s.post(i, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "demo", LeaseMS: s.e.lease.Milliseconds(), Nonce: fmt.Sprintf("%s-%d", s.e.run, i)}, &resp); err != nil {
			return err
		}
		s.renewed(i, t0)
		s.secrets[i] = resp.Secret
		s.ids[i].Store(resp.Session)
		mu.Lock()
		rec.Add(time.Since(t0), time.Now())
		mu.Unlock()
		return nil
	})
}

// closeAll closes every session still open, even after ctx ended.
func (s *sessionSim) closeAll(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	_ = s.each(cctx, "closed", func(i int) error {
		id := s.ids[i].Load()
		if id == 0 || !s.gone[i].CompareAndSwap(false, true) {
			return nil
		}
		err := s.post(i, api.RouteSessionClose, api.CloseSessionRequest{Cell: "demo", Session: id, Secret: s.secrets[i]}, nil)
		if c := api.CodeOf(err); c == api.CodeSessionExpired || c == api.CodeNoSession {
			return nil
		}
		return err
	})
}

// leaderLoad is what one measurement saw: the demo cell leader's
// KeepAlive counters over it, the CPU seconds of the leader (if its
// process is known) and of the proxies before and after, and the
// simulator's own counters when it began; each proxy's resident memory
// at the end.
type leaderLoad struct {
	start                         time.Time // when the measurement began
	elapsed                       time.Duration
	ka, batches, renewed          float64
	cpuBefore, cpuAfter           []float64
	proxyPIDs                     []int
	proxyCPUBefore, proxyCPUAfter []float64
	proxyRSSMB                    []float64
	kaOKBefore, kaErrBefore       int64
}

// measureLeader lets the sessions be renewed for at least two leases (the
// run's duration if longer) and reads the leader's counters and the CPU
// around it.
func (s *sessionSim) measureLeader(ctx context.Context, procs []int) (leaderLoad, error) {
	e, n := s.e, len(s.ids)
	leader, err := leaderIndex(ctx, e.endpoints, "demo")
	if err != nil {
		return leaderLoad{}, err
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
	l := leaderLoad{proxyPIDs: proxyProcesses(procs)}
	l.cpuBefore, l.proxyCPUBefore = cpuTimes(leaderPID), cpuTimes(l.proxyPIDs)
	l.kaOKBefore, l.kaErrBefore = s.kaOK.Load(), s.kaErrors.Load()
	measure := max(e.duration, 2*e.lease)
	waitProfile := e.profile(ctx, fmt.Sprintf("proxy %d sessions", n))
	start := time.Now()
	stop := e.tick(func() string {
		return fmt.Sprintf("%d sessions renewed through %d proxies for %v", n, len(s.proxies), time.Since(start).Round(time.Second))
	})
	select {
	case <-ctx.Done():
	case <-time.After(measure):
	}
	stop()
	l.start, l.elapsed = start, time.Since(start)
	waitProfile()
	l.ka, l.batches, l.renewed = metric("lockd_keepalives_total")-kaBefore, metric("lockd_keepalive_batches_total")-batchesBefore, metric("lockd_keepalive_batched_sessions_total")-renewedBefore
	l.cpuAfter, l.proxyCPUAfter = cpuTimes(leaderPID), cpuTimes(l.proxyPIDs)
	for _, pid := range l.proxyPIDs {
		l.proxyRSSMB = append(l.proxyRSSMB, rssMB(pid))
	}
	return l, nil
}

// result reports one measurement: the clients' KeepAlive latency (kaRec,
// the KeepAlives completed within the measurement alone: it also recorded
// those sent while the sessions opened and until they stopped), the
// leader's RPCs and CPU, the proxies' CPU, false expiries.
func (s *sessionSim) result(l leaderLoad, kaRec *stats.Recorder, openP99 float64) report.Result {
	n, nProxies, elapsed := len(s.ids), len(s.proxies), l.elapsed
	extra := map[string]float64{
		"leader_keepalive_rpcs_per_s":  (l.ka + l.batches) / elapsed.Seconds(),
		"leader_batches_per_s":         l.batches / elapsed.Seconds(),
		"leader_client_keepalives":     l.ka,
		"renewals_per_s":               l.renewed / elapsed.Seconds(),
		"client_keepalives_per_s":      float64(s.kaOK.Load()-l.kaOKBefore) / elapsed.Seconds(),
		"false_expiries":               float64(s.falseExpiries.Load()), // since the first open
		"expired_after_late_keepalive": float64(s.late.Load()),
		"keepalive_errors":             float64(s.kaErrors.Load() - l.kaErrBefore),
		"max_lease_age_ms":             float64(s.maxLeaseAge.Load()),
		"open_p99_ms":                  openP99,
	}
	if len(l.cpuBefore) == 1 && l.cpuBefore[0] >= 0 && l.cpuAfter[0] >= 0 {
		extra["leader_cpu_pct"] = 100 * (l.cpuAfter[0] - l.cpuBefore[0]) / elapsed.Seconds()
	}
	for i := range l.proxyPIDs {
		if l.proxyCPUBefore[i] >= 0 && l.proxyCPUAfter[i] >= 0 {
			extra[fmt.Sprintf("proxy%d_cpu_pct", i+1)] = 100 * (l.proxyCPUAfter[i] - l.proxyCPUBefore[i]) / elapsed.Seconds()
		}
		if i < len(l.proxyRSSMB) && l.proxyRSSMB[i] > 0 {
			extra[fmt.Sprintf("proxy%d_rss_mb", i+1)] = l.proxyRSSMB[i]
		}
	}
	params := map[string]string{"sessions": strconv.Itoa(n), "proxies": strconv.Itoa(nProxies), "lease": s.e.lease.String()}
	if m := s.errMsg.Load(); m != nil {
		params["first_keepalive_error"] = *m
	}
	return report.Result{Scenario: "proxy", Case: fmt.Sprintf("%d sessions via %d proxies (client KeepAlive latency)", n, nProxies),
		Params: params, Summary: kaRec.SummariseWindow(l.start, elapsed), Extra: extra}
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
