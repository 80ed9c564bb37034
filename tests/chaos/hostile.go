package chaos

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/lockservice/lockd/tests/chaos/check"
)

// The hostile tenant (issue 22): while the workloads run, "mallory", a
// tenant with read on the workloads' prefix (basePath) and write on a
// sandbox of its own (hostileSandbox, which does not exist and which it
// cannot create, make_parents reaching outside its grant), tries the
// attacks of issue 22 against every lockd and every lockproxy,
// continually and at a bounded rate, and counts its attempts by kind.
// Checker h1 judges every reply it gets (a request outside its grants
// answered 2xx is a violation, recorded with the request); h2 compares
// the tenants, prefixes and cells before and after, and looks for the
// nodes and values it tried to make; h3 bounds the workloads' write
// latency while it caches their nodes and never acknowledges.
const (
	hostileTenant  = "mallory"
	revokedTenant  = "mallory-revoked" // write on basePath, its token revoked at start
	workloadTenant = "workload"
	hostileSandbox = "/demo/mallory/own" // mallory's write grant: /demo/mallory does not exist
	hostileMiss    = basePath + "/" + check.HostileMark + "-miss"

	// hostileCallTimeout bounds one hostile request.
	hostileCallTimeout = 2 * time.Second
	// hostileMaxRequests bounds every hostile loop's iterations (they
	// also end with the fault phase).
	hostileMaxRequests = 1_000_000
	// hostileBodyLimit is how much of a reply is read and judged.
	hostileBodyLimit = 1 << 20
	// stallSlack is added to the cache window in checker h3: a write's
	// own attempts and retries around the wait.
	stallSlack = 3 * time.Second
	// stallOutageGap: a period this long without a probe commit is an
	// outage of the cell, which excuses a slow write (checker h3).
	stallOutageGap = time.Second
)

// HostileCount is what one kind of attack got.
type HostileCount struct {
	Attempts int `json:"attempts"`
	Refused  int `json:"refused"`   // 401 or 403
	OK       int `json:"ok"`        // 2xx (a violation unless the kind is within its grants)
	Other    int `json:"other"`     // any other status (404, 400, 429, 503, ...)
	NoAnswer int `json:"no_answer"` // transport error or timeout (faults)
	// Statuses counts the answers by HTTP status.
	Statuses map[int]int `json:"statuses,omitempty"`
}

// hostile is the attacker's state.
type hostile struct {
	e       *env
	lockds  []string
	proxies []string
	// readerToken is mallory's; revokedToken the revoked tenant's, and
	// revokedSession a session it opened before its revocation.
	readerToken, revokedToken string
	revokedSession            *sessionRef
	pace                      time.Duration // between two requests of one credential worker
	http                      *http.Client

	mu      sync.Mutex
	counts  map[string]*HostileCount
	windows []check.Window // cache-block attacks: cached and never acknowledged
	// cacheable counts mallory's cached gets the cell (or proxy) made
	// cacheable: it is a recorded cacher of those nodes. invalidations is
	// the most invalidations one of its KeepAlive replies carried, all
	// unacknowledged.
	cacheable, invalidations int
	figures                  hostileFigures
	// handOvers and handOversFailed sum the lockds' planned hand-overs
	// across their restarts (handovers.go).
	handOvers, handOversFailed counterSum
}

// sessionRef is a session mallory (or the revoked tenant) opened.
type sessionRef struct {
	Session uint64 `json:"session"`
	Secret  string `json:"secret"`
}

func newHostile(e *env, lockds, proxies []string) *hostile {
	return &hostile{e: e, lockds: lockds, proxies: proxies, counts: map[string]*HostileCount{},
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second, DisableCompression: true}}}
}

// targets are every lockd and every proxy.
func (x *hostile) targets() []string {
	return append(append([]string(nil), x.lockds...), x.proxies...)
}

// send makes one request to target with the Authorization header auth
// ("" sends none) and returns the status (0: no answer) and the body.
func (x *hostile) send(ctx context.Context, target, method, route string, body []byte, auth string) (int, []byte) {
	ctx, cancel := context.WithTimeout(ctx, hostileCallTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+target+route, rd)
	if err != nil {
		return 0, nil
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := x.http.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, hostileBodyLimit))
	return resp.StatusCode, b
}

// record counts r and judges it (checker h1).
func (x *hostile) record(r check.HostileReply) {
	x.mu.Lock()
	c := x.counts[r.Kind]
	if c == nil {
		c = &HostileCount{Statuses: map[int]int{}}
		x.counts[r.Kind] = c
	}
	c.Attempts++
	c.Statuses[r.Status]++
	switch {
	case r.Status == 0:
		c.NoAnswer++
	case r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden:
		c.Refused++
	case r.Status/100 == 2:
		c.OK++
	default:
		c.Other++
	}
	x.mu.Unlock()
	if r.Expect == check.ExpectAny {
		return
	}
	x.e.h.Checked("hostile-refused")
	if v := check.JudgeHostile(r); v != "" {
		x.e.h.AddViolation("hostile-refused", v)
	}
}

// do sends and records one attack.
func (x *hostile) do(ctx context.Context, r check.HostileReply, method string, body []byte, auth string) (int, []byte) {
	status, b := x.send(ctx, r.Target, method, r.Route, body, auth)
	if status == 0 && ctx.Err() != nil {
		return 0, nil // the run ended under it: not an attempt
	}
	r.Status, r.Body = status, b
	x.record(r)
	return status, b
}

// Counts copies the counts by kind.
func (x *hostile) Counts() map[string]HostileCount {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make(map[string]HostileCount, len(x.counts))
	for k, v := range x.counts {
		c := *v
		c.Statuses = maps.Clone(v.Statuses)
		out[k] = c
	}
	return out
}

// Windows are the cache-block attack windows so far.
func (x *hostile) Windows() []check.Window {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]check.Window(nil), x.windows...)
}

// run attacks until ctx ends or deadline passes; it returns once every
// loop has stopped.
func (x *hostile) run(ctx context.Context, deadline time.Time, rate int) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	const credWorkers = 4
	x.pace = time.Duration(credWorkers) * time.Second / time.Duration(max(rate, 1))
	var wg sync.WaitGroup
	for w := 0; w < credWorkers; w++ {
		wg.Go(func() { x.credLoop(ctx, w) })
	}
	wg.Go(func() { x.cacheBlockLoop(ctx) })
	wg.Go(func() { x.madeUpKeepAliveLoop(ctx) })
	wg.Go(func() { x.figuresLoop(ctx) })
	wg.Wait()
}
