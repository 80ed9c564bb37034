package chaos

import (
	"fmt"
	"hash/fnv"
	"maps"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// The etcd workload (issue 27, deliver 4): clients of etcd's own Go
// library (clientv3 and its concurrency package, and the v3lock Lock
// service) lock and elect through the lockproxies' etcd gateways, under
// the same checkers as the SDK workloads:
//
//   - exclusion in real time (checker a, intervals): a holder's interval
//     runs from the return of its Lock (or Campaign) until it releases,
//     or until its lease clock (etcdSession) says its lease may be gone:
//     the concurrency.Session's Done(), or the TTL its last confirmed
//     KeepAlive answered, counted from that KeepAlive's send — the SDK's
//     lease-clock rule (an etcd client cannot know earlier that it lost
//     the lock);
//   - exclusion in the service's order (checker a, indices): the first key
//     by create revision of a lock's prefix (etcd's lock rule), read
//     through the gateway with the read's revision (its Raft index), and,
//     for the Lock service's lock nodes, the observer and LockState;
//   - fencing (checker b): the key's create revision is the fencing token
//     of the holder's writes to the resource; the checker finds the
//     service's create index of the node (read with the SDK, not through
//     the gateway) and the lease the gateway says owns it;
//   - election: while a campaigner leads, Leader() names its key.
//
// Every client lists every gateway's endpoint, in an order of its own,
// and sticks to one (gRPC pick_first, not clientv3's round robin): a lease
// lives in the gateway that granted it (docs/etcd.md, "Other gateways"),
// so a client must not spread one lease's calls over gateways. A killed
// proxy takes its leases with it: the client fails over to the other
// gateway, its KeepAlive is answered TTL 0, its session ends (Done), and
// it stops counting itself a holder then. That is expected, counted in
// the report, not a violation.

// The etcd workload's locks and election, absolute keys under the
// workloads' prefix (paths of the /demo cell).
const (
	etcdMutexPath = basePath + "/etcd-mutex" // concurrency.Mutex
	etcdLockPath  = basePath + "/etcd-lock"  // the v3lock Lock service (lock nodes w-…)
	etcdElectPath = basePath + "/etcd-elect" // concurrency.Election
)

// Bounds of the etcd workload.
const (
	// maxEtcdWorkers bounds each kind of etcd worker (mutex, Lock
	// service, candidate), whatever Config says.
	maxEtcdWorkers = 16
	// etcdDialTimeout bounds a client's connection and authentication.
	etcdDialTimeout = 10 * time.Second
	// etcdConnectAttempts bounds a worker's tries to make its client
	// (every gateway may be down for a moment: a proxy kill).
	etcdConnectAttempts = 100
	// etcdUser is the etcd user name the clients authenticate with; the
	// gateway ignores it (the password is the API token).
	etcdUser = "workload"
)

// etcdLoad is the etcd workload's shared state: the gateways' endpoints,
// the SDK client its checks read the service with, and its counts for
// the report.
type etcdLoad struct {
	e         *env
	endpoints []string
	ttl       int64       // the sessions' lease TTL, seconds
	sdkc      *sdk.Client // reads the lock nodes' create index and owner

	mu     sync.Mutex
	counts map[string]int
}

func (l *etcdLoad) count(what string) {
	l.mu.Lock()
	l.counts[what]++
	l.mu.Unlock()
}

// etcdShape is how many mutex workers, Lock-service workers and
// candidates run (Config's, bounded).
func etcdShape(cfg Config) (mutexes, lockers, candidates int) {
	bound := func(n int) int { return max(0, min(n, maxEtcdWorkers)) }
	return bound(cfg.EtcdMutexWorkers), bound(cfg.EtcdLockWorkers), bound(cfg.EtcdCandidates)
}

// startEtcdWorkers starts the etcd workers if the proxies run; it returns
// the lock paths the observer should list (the Lock service's lock nodes
// follow the lock service's rules).
func (r *run) startEtcdWorkers() []string {
	mutexes, lockers, candidates := etcdShape(r.cfg)
	if len(r.proxies) == 0 || mutexes+lockers+candidates <= 0 {
		return nil
	}
	e := r.e
	l := &etcdLoad{e: e, ttl: max(1, int64(r.cfg.Lease/time.Second)), counts: map[string]int{}}
	for _, p := range r.proxies {
		l.endpoints = append(l.endpoints, p.EtcdAddr)
	}
	c, err := e.newClient("etcd-check", false, e.cfg.RequestTimeout)
	if err != nil {
		r.logf("chaos: etcd workload not started: %v", err)
		return nil
	}
	l.sdkc = c
	r.etcd = l
	// Every etcd worker is a waiter: after the heal each must be granted
	// (a confirmed grant it wrote under) within the liveness bound.
	start := func(name, path string, once etcdOnce) {
		r.waiters = append(r.waiters, name)
		e.goWorker(func() { l.lockWorker(name, path, once) })
	}
	for k := range mutexes {
		start(fmt.Sprintf("etcd-mutex%d", k), etcdMutexPath, l.mutexOnce)
	}
	for k := range lockers {
		start(fmt.Sprintf("etcd-lock%d", k), etcdLockPath, l.lockServiceOnce)
	}
	for k := range candidates {
		start(fmt.Sprintf("etcd-candidate%d", k), etcdElectPath, l.electOnce)
	}
	return []string{etcdLockPath}
}

// client connects worker name's etcd client: every gateway, starting at
// one chosen by its name; by the name's hash either pick_first (it stays
// on one gateway until that one goes) or clientv3's own round_robin (its
// calls spread over every gateway: its lease's calls at the others are
// forwarded to the granting one, docs/etcd.md "Several gateways");
// authenticated with the workloads' tenant's token (the gateway's etcd
// password is the API token).
func (l *etcdLoad) client(name string) (*clientv3.Client, error) {
	f := fnv.New32a()
	f.Write([]byte(name))
	h := f.Sum32()
	first := int(h % uint32(len(l.endpoints)))
	eps := append(append([]string(nil), l.endpoints[first:]...), l.endpoints[:first]...)
	cfg := clientv3.Config{
		Endpoints:   eps,
		DialTimeout: etcdDialTimeout,
		Logger:      zap.NewNop(),
		Context:     l.e.ctx,
	}
	if h/uint32(len(l.endpoints))%2 == 0 {
		// clientv3's resolver asks for round_robin; without its service
		// config gRPC picks the first gateway that answers and stays.
		cfg.DialOptions = []grpc.DialOption{grpc.WithDisableServiceConfig()}
	}
	if l.e.tenantToken != "" {
		cfg.Username, cfg.Password = etcdUser, l.e.tenantToken
	}
	var err error
	for range etcdConnectAttempts {
		var c *clientv3.Client
		if c, err = clientv3.New(cfg); err == nil {
			return c, nil
		}
		if l.e.ctx.Err() != nil {
			break
		}
		sleepCtx(l.e.ctx, 200*time.Millisecond)
	}
	return nil, fmt.Errorf("%s: etcd client: %w", name, err)
}

// op runs and records one etcd call. local: the gateway may answer it
// without the cell (a lease grant, a revoke of a lease with no keys), so
// the no-majority checker leaves it out.
func (l *etcdLoad) op(worker, kind string, local bool, f func() error) error {
	h := l.e.h
	start := h.Now()
	err := f()
	h.AddOp(check.Op{Worker: worker, Kind: kind, Start: start, End: h.Now(), OK: err == nil, Local: local})
	return err
}

// etcdNode names one incarnation of key in the history. A Mutex's or an
// Election's key is the prefix and the lease's id, the same path each
// time a session takes the lock again: its create revision tells the
// incarnations apart (the checkers take a node to be held from its first
// observation to its last). The Lock service's lock nodes are sequential,
// and named as the observer and LockState name them.
func etcdNode(lock, key string, createRev int64) string {
	if lock == etcdLockPath {
		return key
	}
	return fmt.Sprintf("%s@%d", key, createRev)
}

// obsFirst records what the gateway said of lock's prefix: the key with
// the lowest create revision holds (etcd's lock and election rule) at
// the read's index. It returns that key's incarnation (etcdNode) and
// whether it answered.
func (l *etcdLoad) obsFirst(cli *clientv3.Client, name, lock string) (first string, answered bool) {
	ctx, cancel := l.e.callCtx()
	defer cancel()
	var gr *clientv3.GetResponse
	err := l.op(name, "etcd-get-first", false, func() (err error) {
		gr, err = cli.Get(ctx, lock+"/", clientv3.WithFirstCreate()...)
		return err
	})
	if err != nil {
		return "", false
	}
	if len(gr.Kvs) == 0 {
		return "", true
	}
	first = etcdNode(lock, string(gr.Kvs[0].Key), gr.Kvs[0].CreateRevision)
	l.e.h.AddLockObs(check.LockObs{Lock: lock, Node: first, Mode: api.LockExclusive,
		Index: api.TokenIndex(uint64(gr.Header.Revision)), Held: true, Source: "etcd-first"})
	return first, true
}

// figures are the etcd workload's counts for the report (nil if it did
// not run).
func (l *etcdLoad) figures() map[string]int {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.counts)
}
