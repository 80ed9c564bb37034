package integration_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// startProxies starts n lockproxies beside c; SDK clients made after it
// send through them (the directory lists them). Every second one parks
// its clients' held KeepAlives (--park-keepalives), so that the tests
// meet both ways of holding them.
func startProxies(t *testing.T, c *cluster.Cluster, n int) []*cluster.Proxy {
	t.Helper()
	var out []*cluster.Proxy
	for i := 1; i <= n; i++ {
		var args []string
		if i%2 == 0 {
			args = append(args, "--park-keepalives")
		}
		p, err := c.StartProxy(fmt.Sprintf("proxy-%d", i), args...)
		must(t, err)
		out = append(out, p)
	}
	return out
}

// proxyClient is an SDK client that the directory sends through the proxies.
func proxyClient(t *testing.T, c *cluster.Cluster, lease time.Duration) *sdk.Client {
	t.Helper()
	cl := newSDK(t, c, lease)
	if !cl.ViaProxies() {
		t.Fatal("the client does not use the proxies the directory lists")
	}
	return cl
}

// scrape sums a Prometheus counter or gauge over every series of name
// (with label cell="cell" when cell is set) at addr.
func scrape(t testing.TB, addr, name, cell string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		if cell != "" && !strings.Contains(line, `cell="`+cell+`"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			sum += v
		}
	}
	return sum
}

func proxyStatus(t testing.TB, p *cluster.Proxy) api.ProxyStatus {
	t.Helper()
	resp, err := http.Get("http://" + p.Addr + api.RouteStatus)
	must(t, err)
	defer resp.Body.Close()
	var st api.ProxyStatus
	must(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// TestProxyBatchesKeepAlives: 40 clients hold sessions through two
// proxies; their KeepAlives end at the proxies, and the cell's leader
// receives batches only — no client KeepAlive — while a lock is handed
// from client to client through them (the hand-off event rides a batch).
func TestProxyBatchesKeepAlives(t *testing.T) {
	// Not parallel: it counts KeepAlives over a fixed idle time, which other
	// clusters' load on the machine would blur.
	const lease = 3 * time.Second
	c := cluster.Start(t, cluster.Options{Lease: lease, LogLevel: "debug"}) // the proxies log every refusal
	proxies := startProxies(t, c, 2)
	leader, err := c.LeaderOf("demo")
	must(t, err)
	leaderAddr := c.APIAddr(leader)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()

	clients := make([]*sdk.Client, 40)
	for i := range clients {
		clients[i] = proxyClient(t, c, lease)
		_, err := clients[i].Session(ctx, "demo")
		must(t, err)
	}
	// The proxies' own sessions (opened once a client arms a watch or reads
	// a cached value through them) renew themselves at the leaders.
	ownKAs := func() float64 {
		return scrape(t, proxies[0].Addr, "lockproxy_own_keepalives_total", "") + scrape(t, proxies[1].Addr, "lockproxy_own_keepalives_total", "")
	}
	kaBefore, ownBefore := scrape(t, leaderAddr, "lockd_keepalives_total", "demo"), ownKAs()
	clientKAs := func() float64 {
		return scrape(t, proxies[0].Addr, "lockproxy_client_keepalives_total", "") + scrape(t, proxies[1].Addr, "lockproxy_client_keepalives_total", "")
	}

	// A lock passes through every client, each waiting for the last.
	var prev uint64
	for i, cl := range clients[:10] {
		m := cl.NewMutex("/demo/proxy/handoff")
		must(t, m.Lock(ctx))
		if m.Token() <= prev {
			t.Fatalf("client %d: token %#x not above %#x", i, m.Token(), prev)
		}
		prev = m.Token()
		next := clients[i+1].NewMutex("/demo/proxy/handoff")
		got := make(chan error, 1)
		go func() { got <- next.Lock(ctx) }()
		waitChildren(t, clients[0], "/demo/proxy/handoff", 2)
		must(t, m.Unlock(ctx))
		must(t, <-got)
		if next.Token() <= prev {
			t.Fatalf("hand-off token %#x not above %#x", next.Token(), prev)
		}
		prev = next.Token()
		must(t, next.Unlock(ctx))
	}
	// Idle: renewals only. Each client sends a KeepAlive every lease/3;
	// each proxy renews all of its sessions every lease/12.
	batchesBefore, clientKABefore := scrape(t, leaderAddr, "lockd_keepalive_batches_total", "demo"), clientKAs()
	time.Sleep(2 * lease)
	ka := scrape(t, leaderAddr, "lockd_keepalives_total", "demo") - kaBefore
	batches := scrape(t, leaderAddr, "lockd_keepalive_batches_total", "demo") - batchesBefore
	clientKA := clientKAs() - clientKABefore
	own := ownKAs() - ownBefore
	t.Logf("idle: client KeepAlives at the proxies %.0f, batches at the leader %.0f; over the whole test, KeepAlives at the leader %.0f, of the proxies' own sessions %.0f", clientKA, batches, ka, own)
	if ka > own {
		t.Fatalf("the leader received %.0f KeepAlives, the proxies' own sessions sent %.0f: clients' KeepAlives should end at the proxies", ka, own)
	}
	if batches == 0 || clientKA < 2*batches {
		t.Fatalf("%.0f client KeepAlives became %.0f batches: the proxies do not batch", clientKA, batches)
	}
	sessions := 0
	for _, p := range proxies {
		st := proxyStatus(t, p)
		sessions += st.Sessions
		t.Logf("proxy %s: %+v", p.Name, st)
	}
	if sessions < len(clients) {
		t.Fatalf("the proxies renew %d sessions, want at least %d", sessions, len(clients))
	}
	checkParkedKeepAlives(t, proxies)
	// lockctl status lists the proxies with their clients and sessions.
	lockctl := cluster.Build(t, "./ctl/cmd/lockctl")
	out, err := exec.Command(lockctl, "--endpoints", strings.Join(c.Endpoints(), ","), "status").CombinedOutput()
	must(t, err)
	t.Logf("lockctl status:\n%s", out)
	for _, p := range proxies {
		if !strings.Contains(string(out), p.Name+" ") || !strings.Contains(string(out), p.Addr) {
			t.Fatalf("lockctl status does not list proxy %s at %s", p.Name, p.Addr)
		}
	}
	// No session was lost on the way.
	for i, cl := range clients {
		s, err := cl.Session(ctx, "demo")
		must(t, err)
		if s.Err() != nil {
			t.Fatalf("client %d: session ended: %v", i, s.Err())
		}
	}
}

// TestProxyKillKeepsLocks: a client holds a lock through a proxy that is
// then killed. The client goes on through the other proxy with the same
// session, inside its lease: it keeps the lock and its token, never
// enters jeopardy, and a contender cannot take the lock meanwhile.
func TestProxyKillKeepsLocks(t *testing.T) {
	// Not parallel: it asserts no jeopardy across a proxy kill with a 3 s
	// lease, which other clusters' load on the machine would blur.
	const lease = 3 * time.Second
	c := cluster.Start(t, cluster.Options{Lease: lease, LogLevel: "debug"})
	proxies := startProxies(t, c, 2)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()

	holder := proxyClient(t, c, lease)
	s, err := holder.Session(ctx, "demo")
	must(t, err)
	var (
		evMu   sync.Mutex
		events []sdk.SessionEvent
	)
	go func() {
		for ev := range s.Events() {
			evMu.Lock()
			events = append(events, ev)
			evMu.Unlock()
		}
	}()
	m := holder.NewMutex("/demo/proxy/kill")
	must(t, m.Lock(ctx))
	token := m.Token()

	// Kill the proxy carrying the session.
	var victim *cluster.Proxy
	for _, p := range proxies {
		if proxyStatus(t, p).Sessions > 0 {
			victim = p
		}
	}
	if victim == nil {
		t.Fatal("no proxy renews the holder's session")
	}
	must(t, victim.Kill())

	contender := proxyClient(t, c, lease)
	tctx, tcancel := context.WithTimeout(ctx, 3*lease)
	cm := contender.NewMutex("/demo/proxy/kill")
	err = cm.TryLock(tctx, 3*lease)
	tcancel()
	if err == nil {
		t.Fatalf("a contender took the lock (token %#x) while its holder lives on through the other proxy", cm.Token())
	}
	if m.Context().Err() != nil {
		evMu.Lock()
		t.Logf("session events: %+v", events)
		evMu.Unlock()
		t.Fatalf("the holder's lock context ended (%v): the session was in doubt across the proxy kill", context.Cause(m.Context()))
	}
	if m.Token() != token {
		t.Fatalf("token changed from %#x to %#x", token, m.Token())
	}
	evMu.Lock()
	for _, ev := range events {
		if ev.Type == sdk.SessionJeopardy || ev.Type == sdk.SessionExpired {
			t.Errorf("session event %v across the proxy kill", ev.Type)
		}
	}
	evMu.Unlock()
	for _, p := range proxies {
		if p != victim && proxyStatus(t, p).Sessions == 0 {
			t.Fatal("the surviving proxy does not renew the holder's session")
		}
	}
	// The lock is still the holder's to release.
	must(t, m.Unlock(ctx))
	must(t, cm.Lock(ctx))
	if cm.Token() <= token {
		t.Fatalf("next token %#x not above %#x", cm.Token(), token)
	}
	// The killed proxy comes back and serves again.
	must(t, victim.Restart())
}

// TestProxyTakeoverAfterHolderKilled: a lockctl holder sending through a
// proxy is killed with kill -9. The proxy stops renewing its session once
// its KeepAlives stop, so the next waiter holds the lock about a lease
// later, as without a proxy. A proxy that renewed every session it knew
// (mutant lockproxy_broken_keep_dead) keeps the dead holder's lock forever
// and fails this test.
func TestProxyTakeoverAfterHolderKilled(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	c := cluster.Start(t, cluster.Options{Lease: lease})
	proxies := startProxies(t, c, 2)
	lockctl := cluster.Build(t, "./ctl/cmd/lockctl")

	holder := exec.Command(lockctl, "--endpoints", proxies[0].Addr, "lock", "/demo/proxy/takeover", "--", "sh", "-c", `echo "token=$LOCK_TOKEN"; exec sleep 600`)
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := holder.StdoutPipe()
	must(t, err)
	must(t, holder.Start())
	defer func() { _ = syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); _ = holder.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "token=") {
		t.Fatalf("holder printed %q: %v", line, err)
	}

	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	waiterClient := proxyClient(t, c, lease)
	waiter := waiterClient.NewMutex("/demo/proxy/takeover")
	granted := make(chan time.Time, 1)
	go func() {
		if err := waiter.Lock(ctx); err == nil {
			granted <- time.Now()
		}
	}()
	waitChildren(t, waiterClient, "/demo/proxy/takeover", 2)
	killed := time.Now()
	must(t, syscall.Kill(-holder.Process.Pid, syscall.SIGKILL))
	select {
	case at := <-granted:
		took := at.Sub(killed)
		t.Logf("takeover through a proxy after the holder's kill -9: %v (lease %v)", took.Round(time.Millisecond), lease)
		if took < lease/2 {
			t.Fatalf("takeover after %v: the dead holder's lease ended early", took)
		}
	case <-time.After(5 * lease):
		t.Fatalf("no takeover %v after the holder was killed: a proxy keeps renewing a dead client's session", 5*lease)
	}
}

// TestCachedReadsLinearizableViaProxies is TestCachedReadsLinearizable
// with every client sending through two proxies: reads served from the
// clients' caches stay linearizable with the writes when invalidations
// and their acknowledgements travel through the proxies.
func TestCachedReadsLinearizableViaProxies(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{})
	startProxies(t, c, 2)
	cachedReadsLinearizable(t, c)
}

// TestCacheFlushedOnFailoverViaProxies is TestCacheFlushedOnFailover
// through two proxies: after the leader is killed, no client reads a
// stale value.
func TestCacheFlushedOnFailoverViaProxies(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{})
	startProxies(t, c, 2)
	cacheFlushedOnFailover(t, c)
}

// checkParkedKeepAlives checks that the proxy started with
// --park-keepalives (startProxies: the second) holds its clients'
// KeepAlives parked while they idle, and the first none: a scrape of
// lockproxy_parked_keepalives (at most maxParkedScrapes, 100 ms apart,
// for a moment when one is held).
func checkParkedKeepAlives(t *testing.T, proxies []*cluster.Proxy) {
	t.Helper()
	const maxParkedScrapes = 50
	if proxyStatus(t, proxies[1]).Sessions == 0 {
		t.Logf("no client renews through %s: its parking is not seen", proxies[1].Name)
		return
	}
	for range maxParkedScrapes {
		if n := scrape(t, proxies[0].Addr, "lockproxy_parked_keepalives", ""); n != 0 {
			t.Fatalf("proxy %s, without --park-keepalives, parked %.0f KeepAlives", proxies[0].Name, n)
		}
		if scrape(t, proxies[1].Addr, "lockproxy_parked_keepalives", "") > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("proxy %s, with --park-keepalives, never held a KeepAlive parked", proxies[1].Name)
}
