package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// etcdTarget runs the scenarios through etcd's own client and recipes: a
// locker is a concurrency.Session (a lease of the run's TTL, kept alive)
// taking concurrency.Mutex locks (each waiter watches the key just before
// its own: the same queue as lockd's), a writer puts through a client, a
// held session is a client with one session.
type etcdTarget struct {
	endpoints []string
	lease     time.Duration
	progress  func(format string, args ...any)
}

// etcdParallelOpens bounds the sessions opened or closed at once (as the
// lockd target's sessionClients does).
const etcdParallelOpens = 32

// The counters behind herd's events per release and sessions' KeepAlives
// per second: events sent to watchers, and leases renewed by the leader.
const (
	etcdWatchEventsMetric = "etcd_debugging_mvcc_events_total"
	etcdRenewedMetric     = "etcd_debugging_lease_renewed_total"
)

// dial opens an etcd client on endpoints (its own connections; quiet: the
// scenarios report failures themselves).
func dial(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// leaseTTL is the lease in etcd's whole seconds, rounded up.
func leaseTTL(lease time.Duration) int {
	return max(1, int(math.Ceil(lease.Seconds())))
}

// conns opens n clients on every endpoint.
func (t *etcdTarget) conns(n int) ([]*clientv3.Client, func(), error) {
	var cs []*clientv3.Client
	closeAll := func() {
		for _, c := range cs {
			_ = c.Close()
		}
	}
	for i := 0; i < n; i++ {
		c, err := dial(t.endpoints)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		cs = append(cs, c)
	}
	return cs, closeAll, nil
}

// etcdLocker takes concurrency.Mutex locks on its session.
type etcdLocker struct{ s *concurrency.Session }

func (l etcdLocker) lock(ctx context.Context, path string) (func(context.Context) error, error) {
	m := concurrency.NewMutex(l.s, path)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

// etcdWriter puts through one client.
type etcdWriter struct{ c *clientv3.Client }

func (w etcdWriter) put(ctx context.Context, path string, value []byte) error {
	_, err := w.c.Put(ctx, path, string(value))
	return err
}

// lockers gives each locker a session of its own (an etcd mutex is one
// key per lease: two waiters on one session would share the lock).
func (t *etcdTarget) lockers(ctx context.Context, conns, n int) ([]locker, func(), error) {
	cs, closeConns, err := t.conns(conns)
	if err != nil {
		return nil, nil, err
	}
	ss := make([]*concurrency.Session, n)
	closeAll := func() {
		closeSessions(ss)
		closeConns()
	}
	err = forEachBounded(ctx, n, func(i int) error {
		var err error
		ss[i], err = concurrency.NewSession(cs[i%len(cs)], concurrency.WithTTL(leaseTTL(t.lease)), concurrency.WithContext(ctx))
		return err
	})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	out := make([]locker, n)
	for i, s := range ss {
		out[i] = etcdLocker{s}
	}
	return out, closeAll, nil
}

func (t *etcdTarget) writers(_ context.Context, conns, n int) ([]writer, func(), error) {
	cs, closeAll, err := t.conns(conns)
	if err != nil {
		return nil, nil, err
	}
	out := make([]writer, n)
	for i := range out {
		out[i] = etcdWriter{cs[i%len(cs)]}
	}
	return out, closeAll, nil
}

// etcdSession is one held session.
type etcdSession struct{ s *concurrency.Session }

func (s etcdSession) lost() bool {
	select {
	case <-s.s.Done():
		return true
	default:
		return false
	}
}

// sessions opens n clients, each on one member (round robin: many small
// clients spread over a cluster, not each connected to all five), with
// one session each.
func (t *etcdTarget) sessions(ctx context.Context, n int, onOpen func(time.Duration)) ([]heldSession, func(), error) {
	cs := make([]*clientv3.Client, n)
	ss := make([]*concurrency.Session, n)
	closeAll := func() {
		closeSessions(ss)
		for _, c := range cs {
			if c != nil {
				_ = c.Close()
			}
		}
	}
	var opened atomic.Int64
	var mu sync.Mutex
	err := forEachBounded(ctx, n, func(i int) error {
		c, err := dial([]string{t.endpoints[i%len(t.endpoints)]})
		if err != nil {
			return err
		}
		cs[i] = c
		t0 := time.Now()
		if ss[i], err = concurrency.NewSession(c, concurrency.WithTTL(leaseTTL(t.lease)), concurrency.WithContext(ctx)); err != nil {
			return err
		}
		if onOpen != nil {
			mu.Lock()
			onOpen(time.Since(t0))
			mu.Unlock()
		}
		if k := opened.Add(1); k%1000 == 0 && t.progress != nil {
			t.progress("%d/%d sessions open", k, n)
		}
		return nil
	})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	out := make([]heldSession, n)
	for i, s := range ss {
		out[i] = etcdSession{s}
	}
	return out, closeAll, nil
}

// closeSessions revokes the sessions' leases, at most etcdParallelOpens at
// a time; nil entries (never opened) are skipped.
func closeSessions(ss []*concurrency.Session) {
	_ = forEachBounded(context.Background(), len(ss), func(i int) error {
		if ss[i] != nil {
			_ = ss[i].Close()
		}
		return nil
	})
}

// forEachBounded calls f for 0..n-1, at most etcdParallelOpens at once; the
// first error stops the calls not yet started and is returned.
func forEachBounded(ctx context.Context, n int, f func(i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(etcdParallelOpens)
	for i := 0; i < n && gctx.Err() == nil; i++ {
		g.Go(func() error { return f(i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

func (t *etcdTarget) watchEvents(ctx context.Context) (float64, error) {
	return etcdCounter(ctx, t.endpoints, etcdWatchEventsMetric)
}

func (t *etcdTarget) keepAlives(ctx context.Context) (float64, error) {
	return etcdCounter(ctx, t.endpoints, etcdRenewedMetric)
}

func (t *etcdTarget) version(ctx context.Context) (string, error) {
	c, err := dial(t.endpoints)
	if err != nil {
		return "", err
	}
	defer c.Close()
	var last error
	for _, ep := range t.endpoints {
		st, err := c.Status(ctx, ep)
		if err == nil {
			return st.Version, nil
		}
		last = err
	}
	return "", last
}

// etcdCounter adds up a counter over every member's /metrics (a member
// down counts nothing).
func etcdCounter(ctx context.Context, endpoints []string, name string) (float64, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	var sum float64
	for _, ep := range endpoints {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, httpURL(ep)+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		v, err := counterSum(resp.Body, name)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("%s/metrics: %w", ep, err)
		}
		sum += v
	}
	return sum, nil
}

// httpURL is an endpoint as a URL: host:port gets http://.
func httpURL(ep string) string {
	if strings.Contains(ep, "://") {
		return strings.TrimRight(ep, "/")
	}
	return "http://" + ep
}

// counterSum adds up the samples of the named metric in a Prometheus text
// exposition, with or without labels.
func counterSum(r io.Reader, name string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}
