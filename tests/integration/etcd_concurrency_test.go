package integration_test

// etcd's own tests of its Go client's concurrency package (Session, Mutex,
// Election, STM), run unchanged in what they do and assert, against the
// etcd gateway (lockproxy --etcd-listen) instead of an etcd cluster.
//
// Adapted from etcd (Apache License 2.0, Copyright 2016-2025 The etcd
// Authors), github.com/etcd-io/etcd at tag v3.7.1, commit
// 5e7fd0de9a57db03ecc11794dc40403a734c07bb (the newest tag the stored copy
// has; this module requires client v3.7.3, whose concurrency package those
// tests exercise):
//   - tests/integration/clientv3/concurrency/election_test.go: TestResumeElection
//   - tests/integration/clientv3/concurrency/mutex_test.go: TestMutexLockSessionExpired, TestMutexUnlock
//   - tests/integration/clientv3/concurrency/session_test.go: TestSessionOptions, TestSessionTTLOptions, TestSessionCtx
//   - tests/integration/clientv3/concurrency/example_{election,mutex,stm}_test.go
//     (the same bodies as client/v3/concurrency/example_*_test.go, which
//     run them mocked): ExampleElection_Campaign, ExampleMutex_TryLock,
//     ExampleMutex_Lock, ExampleSTM_apply, their printed lines checked
//     against the examples' "Output:"
//   - tests/integration/v3_stm_test.go: TestSTMConflict, TestSTMPutNewKey,
//     TestSTMAbort, TestSTMSerialize, TestSTMApplyOnConcurrentDeletion,
//     TestSTMSerializableSnapshotPut
//   - tests/integration/v3_election_test.go: TestElectionWait,
//     TestElectionSessionRecampaign, TestElectionOnPrefixOfExistingKey,
//     TestElectionOnSessionRestart, TestElectionObserveFreshResponsesOnProclaim
//
// What changed, and only that: the client is etcd's clientv3 on the
// gateway (g.client) instead of integration.NewClient or a cluster
// member's; log.Fatal and testify's require/assert became t.Fatal/t.Error;
// every test gets its own keys (upstream gives each test a fresh cluster;
// here one cluster serves them in turn and an orphaned session's keys
// outlive its test by the lease's TTL): a relative key "k" becomes
// "<test>/k" (under the default prefix /etcd), and an absolute one outside
// every served prefix ("/my-lock/") becomes "/demo/<test>/my-lock": a
// path has no empty segment and no trailing "/" (docs/etcd.md "Keys"), and
// "/my-lock" is no served top-level prefix; t.Context() calls are bounded
// (etcdConcurrencyTimeout). Skipped, with the reason in t.Skip:
// TestElectionFailover (kills etcd members the client fails over
// between; the fault suite does this with lockds and proxies),
// TestElectionObserveCompacted (compaction is Unimplemented: no history is
// kept), TestElectionWithAuthEnabled (etcd users and roles: tenants and API
// tokens instead, run here in the tokens mode), client/v3/concurrency
// stm_test.go TestGet (a unit test of an unexported type, no server).

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// etcdConcurrencyTimeout bounds one adapted test.
const etcdConcurrencyTimeout = 90 * time.Second

// etcdUpstreamTest is one adapted test: it gets the gateway and a
// namespace ns of its own for its keys.
type etcdUpstreamTest struct {
	name string
	run  func(t *testing.T, ctx context.Context, g *etcdGW, ns string)
	// allModes runs it in the tokens and mtls modes too (else plain only).
	allModes bool
}

var etcdUpstreamTests = []etcdUpstreamTest{
	{"TestResumeElection", upTestResumeElection, false},
	{"TestMutexLockSessionExpired", upTestMutexLockSessionExpired, false},
	{"TestMutexUnlock", upTestMutexUnlock, false},
	{"TestSessionOptions", upTestSessionOptions, false},
	{"TestSessionTTLOptions", upTestSessionTTLOptions, false},
	{"TestSessionCtx", upTestSessionCtx, false},
	{"ExampleElection_Campaign", upExampleElectionCampaign, true},
	{"ExampleMutex_TryLock", upExampleMutexTryLock, true},
	{"ExampleMutex_Lock", upExampleMutexLock, true},
	{"ExampleSTM_apply", upExampleSTMApply, true},
	{"TestSTMConflict", upTestSTMConflict, false},
	{"TestSTMPutNewKey", upTestSTMPutNewKey, false},
	{"TestSTMAbort", upTestSTMAbort, false},
	{"TestSTMSerialize", upTestSTMSerialize, false},
	{"TestSTMApplyOnConcurrentDeletion", upTestSTMApplyOnConcurrentDeletion, false},
	{"TestSTMSerializableSnapshotPut", upTestSTMSerializableSnapshotPut, false},
	{"TestElectionWait", upTestElectionWait, false},
	{"TestElectionSessionRecampaign", upTestElectionSessionRecampaign, false},
	{"TestElectionOnPrefixOfExistingKey", upTestElectionOnPrefixOfExistingKey, false},
	{"TestElectionOnSessionRestart", upTestElectionOnSessionRestart, false},
	{"TestElectionObserveFreshResponsesOnProclaim", upTestElectionObserveFreshResponsesOnProclaim, false},
}

// etcdUpstreamSkipped are the upstream tests not run, and why.
var etcdUpstreamSkipped = map[string]string{
	"TestElectionFailover":         "kills etcd members the client fails over between; the gateway is one lockproxy here (the fault suite kills lockds and proxies under etcd clients)",
	"TestElectionObserveCompacted": "compaction is Unimplemented through the gateway: no history is kept, nothing to compact (docs/etcd.md \"Not supported\")",
	"TestElectionWithAuthEnabled":  "etcd's users and roles (UserAdd, RoleGrantPermission) are Unimplemented: tenants and API tokens replace them; the tokens mode runs the examples with a tenant's token",
	"stm_test.go TestGet":          "a unit test of the unexported stmSerializable: it talks to no server",
}

// TestEtcdConcurrencyUpstream runs etcd's tests of its concurrency
// package (the header of this file lists them) against the gateway on
// three real lockds: every one in plain mode, the examples also with
// tokens required and over mutual TLS.
func TestEtcdConcurrencyUpstream(t *testing.T) {
	t.Parallel()
	for _, mode := range etcdModes {
		t.Run(string(mode), func(t *testing.T) {
			g := startEtcdGW(t, mode)
			g.waitGateway(t, g.client(t))
			for _, u := range etcdUpstreamTests {
				if mode != etcdPlain && !u.allModes {
					continue
				}
				t.Run(u.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), etcdConcurrencyTimeout)
					defer cancel()
					u.run(t, ctx, g, string(mode)+"-"+u.name)
				})
			}
			if mode == etcdPlain {
				t.Run("repro/TxnHeaderIsItsWrite", func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), etcdConcurrencyTimeout)
					defer cancel()
					reproTxnHeaderIsItsWrite(t, ctx, g, "repro-txn-header")
				})
				for name, why := range etcdUpstreamSkipped {
					t.Run(name, func(t *testing.T) { t.Skip(why) })
				}
			}
		})
	}
}

// demoKey is an upstream absolute key of a test's own under /demo:
// "/my-lock/" → "/demo/<ns>/my-lock".
func demoKey(ns, k string) string { return "/demo/" + ns + "/" + strings.Trim(k, "/") }

// relKey is an upstream relative key of a test's own: "foo" → "<ns>/foo".
func relKey(ns, k string) string { return ns + "/" + k }

// ---- tests/integration/clientv3/concurrency/election_test.go

func upTestResumeElection(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	prefix := demoKey(ns, "/resume-election/")

	cli := g.client(t)

	s, err := concurrency.NewSession(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	e := concurrency.NewElection(s, prefix)

	// entire test should never take more than 10 seconds
	ctx, cancel := context.WithTimeout(ctx, time.Second*10)
	defer cancel()

	// become leader
	if err := e.Campaign(ctx, "candidate1"); err != nil {
		t.Fatalf("Campaign() returned non nil err: %v", err)
	}

	// get the leadership details of the current election
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatalf("Leader() returned non nil err: %v", err)
	}

	// Recreate the election
	e = concurrency.ResumeElection(s, prefix,
		string(leader.Kvs[0].Key), leader.Kvs[0].CreateRevision)

	respChan := make(chan *clientv3.GetResponse)
	go func() {
		defer close(respChan)
		o := e.Observe(ctx)
		respChan <- nil
		for resp := range o {
			// Ignore any observations that candidate1 was elected
			if string(resp.Kvs[0].Value) == "candidate1" {
				continue
			}
			respChan <- resp
			return
		}
		t.Error("Observe() channel closed prematurely")
	}()

	// wait until observe goroutine is running
	<-respChan

	// put some random data to generate a change event, this put should be
	// ignored by Observe() because it is not under the election prefix.
	if _, err = cli.Put(ctx, relKey(ns, "foo"), "bar"); err != nil {
		t.Fatalf("Put('foo') returned non nil err: %v", err)
	}

	// resign as leader
	if err := e.Resign(ctx); err != nil {
		t.Fatalf("Resign() returned non nil err: %v", err)
	}

	// elect a different candidate
	if err := e.Campaign(ctx, "candidate2"); err != nil {
		t.Fatalf("Campaign() returned non nil err: %v", err)
	}

	// wait for observed leader change
	resp := <-respChan
	if resp == nil {
		t.Fatal("Observe() ended without a leader change")
	}

	kv := resp.Kvs[0]
	if !strings.HasPrefix(string(kv.Key), prefix) {
		t.Errorf("expected observed election to have prefix '%s' got %q", prefix, string(kv.Key))
	}
	if string(kv.Value) != "candidate2" {
		t.Errorf("expected new leader to be 'candidate1' got %q", string(kv.Value))
	}
}

// ---- tests/integration/clientv3/concurrency/mutex_test.go

func upTestMutexLockSessionExpired(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	cli := g.client(t)

	// create two separate sessions for lock competition
	s1, err := concurrency.NewSession(cli)
	must(t, err)
	defer s1.Close()
	m1 := concurrency.NewMutex(s1, demoKey(ns, "/my-lock/"))

	s2, err := concurrency.NewSession(cli)
	must(t, err)
	m2 := concurrency.NewMutex(s2, demoKey(ns, "/my-lock/"))

	// acquire lock for s1
	must(t, m1.Lock(ctx))

	m2Locked := make(chan struct{})
	var err2 error
	go func() {
		defer close(m2Locked)
		// m2 blocks since m1 already acquired lock /my-lock/
		if err2 = m2.Lock(ctx); err2 == nil {
			t.Error("expect session expired error")
		}
	}()

	// revoke the session of m2 before unlock m1
	must(t, s2.Close())
	must(t, m1.Unlock(ctx))

	<-m2Locked
}

func upTestMutexUnlock(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	cli := g.client(t)

	s1, err := concurrency.NewSession(cli)
	must(t, err)
	defer s1.Close()

	m1 := concurrency.NewMutex(s1, demoKey(ns, "/my-lock/"))
	err = m1.Unlock(ctx)
	if err == nil {
		t.Fatal("expect lock released error")
	}
	if !errors.Is(err, concurrency.ErrLockReleased) {
		t.Fatal(err)
	}

	must(t, m1.Lock(ctx))

	must(t, m1.Unlock(ctx))

	err = m1.Unlock(ctx)
	if err == nil {
		t.Fatal("expect lock released error")
	}
	if !errors.Is(err, concurrency.ErrLockReleased) {
		t.Fatal(err)
	}
}

// ---- tests/integration/clientv3/concurrency/session_test.go

func upTestSessionOptions(t *testing.T, ctx context.Context, g *etcdGW, _ string) {
	cli := g.client(t)
	lease, err := cli.Grant(ctx, 100)
	must(t, err)
	s, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID))
	must(t, err)
	defer s.Close()
	if s.Lease() != lease.ID {
		t.Fatalf("session lease %x, want %x", s.Lease(), lease.ID)
	}

	go s.Orphan()
	select {
	case <-s.Done():
	case <-time.After(time.Millisecond * 100):
		t.Fatal("session did not get orphaned as expected")
	}
}

func upTestSessionTTLOptions(t *testing.T, ctx context.Context, g *etcdGW, _ string) {
	cli := g.client(t)

	setTTL := 90
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(setTTL))
	must(t, err)
	defer s.Close()

	leaseID := s.Lease()
	// TTL retrieved should be less than the set TTL, but not equal to default:60 or exprired:-1
	resp, err := cli.Lease.TimeToLive(ctx, leaseID)
	if err != nil {
		t.Fatal(err) // upstream logs it and then reads resp: it would panic
	}
	if resp.TTL == -1 {
		t.Errorf("client lease should not be expired: %d", resp.TTL)
	}
	if resp.TTL == 60 {
		t.Errorf("default TTL value is used in the session, instead of set TTL: %d", setTTL)
	}
	if resp.TTL >= int64(setTTL) || resp.TTL < int64(setTTL)-20 {
		t.Errorf("Session TTL from lease should be less, but close to set TTL %d, have: %d", setTTL, resp.TTL)
	}
}

func upTestSessionCtx(t *testing.T, ctx context.Context, g *etcdGW, _ string) {
	cli := g.client(t)
	lease, err := cli.Grant(ctx, 100)
	must(t, err)
	s, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID))
	must(t, err)
	defer s.Close()
	if s.Lease() != lease.ID {
		t.Fatalf("session lease %x, want %x", s.Lease(), lease.ID)
	}

	childCtx, cancel := context.WithCancel(s.Ctx())
	defer cancel()

	go s.Orphan()
	select {
	case <-childCtx.Done():
	case <-time.After(time.Millisecond * 100):
		t.Fatal("child context of session context is not canceled")
	}
	if childCtx.Err() != context.Canceled {
		t.Fatalf("child context: %v, want context.Canceled", childCtx.Err())
	}
}

// ---- tests/integration/clientv3/concurrency/example_*_test.go
//
// The examples print lines checked against their "Output:"; printed is
// the fmt.Println of the original, collected.

type printed struct {
	mu    sync.Mutex
	lines []string
}

func (p *printed) Println(a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, strings.TrimSuffix(fmt.Sprintln(a...), "\n"))
}

func (p *printed) check(t *testing.T, want ...string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if strings.Join(p.lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("output:\n%s\nwant:\n%s", strings.Join(p.lines, "\n"), strings.Join(want, "\n"))
	}
}

func upExampleElectionCampaign(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	var fmt printed
	cli := g.client(t)

	// create two separate sessions for election competition
	s1, err := concurrency.NewSession(cli)
	must(t, err)
	defer s1.Close()
	e1 := concurrency.NewElection(s1, demoKey(ns, "/my-election/"))

	s2, err := concurrency.NewSession(cli)
	must(t, err)
	defer s2.Close()
	e2 := concurrency.NewElection(s2, demoKey(ns, "/my-election/"))

	// create competing candidates, with e1 initially losing to e2
	var wg sync.WaitGroup
	wg.Add(2)
	electc := make(chan *concurrency.Election, 2)
	go func() {
		defer wg.Done()
		// delay candidacy so e2 wins first
		time.Sleep(3 * time.Second)
		if err := e1.Campaign(ctx, "e1"); err != nil {
			t.Error(err)
			return
		}
		electc <- e1
	}()
	go func() {
		defer wg.Done()
		if err := e2.Campaign(ctx, "e2"); err != nil {
			t.Error(err)
			return
		}
		electc <- e2
	}()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()

	e := <-electc
	fmt.Println("completed first election with", string((<-e.Observe(cctx)).Kvs[0].Value))

	// resign so next candidate can be elected
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}

	e = <-electc
	fmt.Println("completed second election with", string((<-e.Observe(cctx)).Kvs[0].Value))

	wg.Wait()

	fmt.check(t,
		"completed first election with e2",
		"completed second election with e1")
}

func upExampleMutexTryLock(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	var fmt printed
	cli := g.client(t)

	// create two separate sessions for lock competition
	s1, err := concurrency.NewSession(cli)
	must(t, err)
	defer s1.Close()
	m1 := concurrency.NewMutex(s1, demoKey(ns, "/my-lock"))

	s2, err := concurrency.NewSession(cli)
	must(t, err)
	defer s2.Close()
	m2 := concurrency.NewMutex(s2, demoKey(ns, "/my-lock"))

	// acquire lock for s1
	if err = m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("acquired lock for s1")

	if err = m2.TryLock(ctx); err == nil {
		t.Fatal("should not acquire lock")
	}
	if errors.Is(err, concurrency.ErrLocked) {
		fmt.Println("cannot acquire lock for s2, as already locked in another session")
	}

	if err = m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("released lock for s1")
	if err = m2.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("acquired lock for s2")

	fmt.check(t,
		"acquired lock for s1",
		"cannot acquire lock for s2, as already locked in another session",
		"released lock for s1",
		"acquired lock for s2")
}

func upExampleMutexLock(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	var fmt printed
	cli := g.client(t)

	// create two separate sessions for lock competition
	s1, err := concurrency.NewSession(cli)
	must(t, err)
	defer s1.Close()
	m1 := concurrency.NewMutex(s1, demoKey(ns, "/my-lock/"))

	s2, err := concurrency.NewSession(cli)
	must(t, err)
	defer s2.Close()
	m2 := concurrency.NewMutex(s2, demoKey(ns, "/my-lock/"))

	// acquire lock for s1
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("acquired lock for s1")

	m2Locked := make(chan struct{})
	go func() {
		defer close(m2Locked)
		// wait until s1 is locks /my-lock/
		if err := m2.Lock(ctx); err != nil {
			t.Error(err)
		}
	}()

	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("released lock for s1")

	<-m2Locked
	fmt.Println("acquired lock for s2")

	fmt.check(t,
		"acquired lock for s1",
		"released lock for s1",
		"acquired lock for s2")
}

func upExampleSTMApply(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	var fmt2 printed
	cli := g.client(t)

	// set up "accounts"
	totalAccounts := 5
	for i := 0; i < totalAccounts; i++ {
		k := fmt.Sprintf(relKey(ns, "accts/%d"), i)
		if _, err := cli.Put(ctx, k, "100"); err != nil {
			t.Fatal(err)
		}
	}

	exchange := func(stm concurrency.STM) {
		from, to := rand.Intn(totalAccounts), rand.Intn(totalAccounts)
		if from == to {
			// nothing to do
			return
		}
		// read values
		fromK, toK := fmt.Sprintf(relKey(ns, "accts/%d"), from), fmt.Sprintf(relKey(ns, "accts/%d"), to)
		fromV, toV := stm.Get(fromK), stm.Get(toK)
		fromInt, toInt := 0, 0
		fmt.Sscanf(fromV, "%d", &fromInt)
		fmt.Sscanf(toV, "%d", &toInt)

		// transfer amount
		xfer := fromInt / 2
		fromInt, toInt = fromInt-xfer, toInt+xfer

		// write back
		stm.Put(fromK, fmt.Sprintf("%d", fromInt))
		stm.Put(toK, fmt.Sprintf("%d", toInt))
	}

	// concurrently exchange values between accounts
	var wg sync.WaitGroup
	wg.Add(10)
	for i := 0; i < 10; i++ {
		go func() {
			defer wg.Done()
			if _, serr := concurrency.NewSTM(cli, func(stm concurrency.STM) error {
				exchange(stm)
				return nil
			}, concurrency.WithAbortContext(ctx)); serr != nil {
				t.Error(serr)
			}
		}()
	}
	wg.Wait()

	// confirm account sum matches sum from beginning.
	sum := 0
	accts, err := cli.Get(ctx, relKey(ns, "accts/"), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range accts.Kvs {
		v := 0
		fmt.Sscanf(string(kv.Value), "%d", &v)
		sum += v
	}

	fmt2.Println("account sum is", sum)
	fmt2.check(t, "account sum is 500")
}

// ---- tests/integration/v3_stm_test.go

// TestSTMConflict tests that conflicts are retried.
func upTestSTMConflict(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	etcdc := g.client(t)
	keys := make([]string, 5)
	for i := 0; i < len(keys); i++ {
		keys[i] = relKey(ns, fmt.Sprintf("foo-%d", i))
		if _, err := etcdc.Put(ctx, keys[i], "100"); err != nil {
			t.Fatalf("could not make key (%v)", err)
		}
	}

	errc := make(chan error)
	for i := range keys {
		curEtcdc := g.client(t)
		srcKey := keys[i]
		applyf := func(stm concurrency.STM) {
			src := stm.Get(srcKey)
			// must be different key to avoid double-adding
			dstKey := srcKey
			for dstKey == srcKey {
				dstKey = keys[rand.Intn(len(keys))]
			}
			dst := stm.Get(dstKey)
			srcV, _ := strconv.ParseInt(src, 10, 64)
			dstV, _ := strconv.ParseInt(dst, 10, 64)
			if srcV == 0 {
				// can't rand.Intn on 0, so skip this transaction
				return
			}
			xfer := int64(rand.Intn(int(srcV)) / 2)
			stm.Put(srcKey, fmt.Sprintf("%d", srcV-xfer))
			stm.Put(dstKey, fmt.Sprintf("%d", dstV+xfer))
		}
		go func() {
			iso := concurrency.WithIsolation(concurrency.RepeatableReads)
			_, err := concurrency.NewSTM(curEtcdc,
				func(stm concurrency.STM) error {
					applyf(stm)
					return nil
				},
				iso, concurrency.WithAbortContext(ctx),
			)
			errc <- err
		}()
	}

	// wait for txns
	for range keys {
		if err := <-errc; err != nil {
			t.Fatalf("apply failed (%v)", err)
		}
	}

	// ensure sum matches initial sum
	sum := 0
	for _, oldkey := range keys {
		rk, err := etcdc.Get(ctx, oldkey)
		if err != nil {
			t.Fatalf("couldn't fetch key %s (%v)", oldkey, err)
		}
		v, _ := strconv.ParseInt(string(rk.Kvs[0].Value), 10, 64)
		sum += int(v)
	}
	if sum != len(keys)*100 {
		t.Fatalf("bad sum. got %d, expected %d", sum, len(keys)*100)
	}
}

// TestSTMPutNewKey confirms a STM put on a new key is visible after commit.
func upTestSTMPutNewKey(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	etcdc := g.client(t)
	foo := relKey(ns, "foo")
	applyf := func(stm concurrency.STM) error {
		stm.Put(foo, "bar")
		return nil
	}

	iso := concurrency.WithIsolation(concurrency.RepeatableReads)
	if _, err := concurrency.NewSTM(etcdc, applyf, iso, concurrency.WithAbortContext(ctx)); err != nil {
		t.Fatalf("error on stm txn (%v)", err)
	}

	resp, err := etcdc.Get(ctx, foo)
	if err != nil {
		t.Fatalf("error fetching key (%v)", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "bar" {
		t.Fatalf("bad value. got %+v, expected 'bar' value", resp)
	}
}

// TestSTMAbort tests that an aborted txn does not modify any keys.
func upTestSTMAbort(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	etcdc := g.client(t)
	foo := relKey(ns, "foo")
	actx, cancel := context.WithCancel(ctx)
	applyf := func(stm concurrency.STM) error {
		stm.Put(foo, "baz")
		cancel()
		stm.Put(foo, "bap")
		return nil
	}

	iso := concurrency.WithIsolation(concurrency.RepeatableReads)
	sctx := concurrency.WithAbortContext(actx)
	if _, err := concurrency.NewSTM(etcdc, applyf, iso, sctx); err == nil {
		t.Fatalf("no error on stm txn")
	}

	resp, err := etcdc.Get(ctx, foo)
	if err != nil {
		t.Fatalf("error fetching key (%v)", err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("bad value. got %+v, expected nothing", resp)
	}
}

// TestSTMSerialize tests that serialization is honored when serializable.
func upTestSTMSerialize(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	etcdc := g.client(t)

	// set up initial keys
	keys := make([]string, 5)
	for i := 0; i < len(keys); i++ {
		keys[i] = relKey(ns, fmt.Sprintf("foo-%d", i))
	}

	// update keys in full batches
	updatec := make(chan struct{})
	go func() {
		defer close(updatec)
		for i := 0; i < 5; i++ {
			s := fmt.Sprintf("%d", i)
			var ops []clientv3.Op
			for _, k := range keys {
				ops = append(ops, clientv3.OpPut(k, s))
			}
			if _, err := etcdc.Txn(ctx).Then(ops...).Commit(); err != nil {
				t.Errorf("couldn't put keys (%v)", err)
			}
			select {
			case updatec <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()

	// read all keys in txn, make sure all values match
	errc := make(chan error, 5)
	started := 0
	for range updatec {
		started++
		curEtcdc := g.client(t)
		applyf := func(stm concurrency.STM) error {
			var vs []string
			for i := range keys {
				vs = append(vs, stm.Get(keys[i]))
			}
			for i := range vs {
				if vs[0] != vs[i] {
					return fmt.Errorf("got vs[%d] = %v, want %v", i, vs[i], vs[0])
				}
			}
			return nil
		}
		go func() {
			iso := concurrency.WithIsolation(concurrency.Serializable)
			_, err := concurrency.NewSTM(curEtcdc, applyf, iso, concurrency.WithAbortContext(ctx))
			errc <- err
		}()
	}

	for i := 0; i < started; i++ {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	if started != 5 {
		t.Errorf("%d of 5 batches written", started)
	}
}

// TestSTMApplyOnConcurrentDeletion ensures that concurrent key deletion
// fails the first GET revision comparison within STM; trigger retry.
func upTestSTMApplyOnConcurrentDeletion(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	etcdc := g.client(t)
	foo, foo2 := relKey(ns, "foo"), relKey(ns, "foo2")
	_, err := etcdc.Put(ctx, foo, "bar")
	must(t, err)
	donec, readyc := make(chan struct{}), make(chan struct{})
	go func() {
		<-readyc
		_, derr := etcdc.Delete(ctx, foo)
		if derr != nil {
			t.Error(derr)
		}
		close(donec)
	}()

	try := 0
	applyf := func(stm concurrency.STM) error {
		try++
		stm.Get(foo)
		if try == 1 {
			// trigger delete to make GET rev comparison outdated
			close(readyc)
			<-donec
		}
		stm.Put(foo2, "bar2")
		return nil
	}

	iso := concurrency.WithIsolation(concurrency.RepeatableReads)
	_, err = concurrency.NewSTM(etcdc, applyf, iso, concurrency.WithAbortContext(ctx))
	if err != nil {
		t.Fatalf("error on stm txn: %v", err)
	}

	if try != 2 {
		t.Fatalf("STM apply expected to run twice, got %d", try)
	}

	resp, err := etcdc.Get(ctx, foo2)
	if err != nil {
		t.Fatalf("error fetching key (%v)", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "bar2" {
		t.Fatalf("bad value. got %+v, expected 'bar2' value", resp)
	}
}

func upTestSTMSerializableSnapshotPut(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	cli := g.client(t)
	a, b := relKey(ns, "a"), relKey(ns, "b")
	// key with lower create/mod revision than keys being updated
	_, err := cli.Put(ctx, a, "0")
	must(t, err)

	tries := 0
	applyf := func(stm concurrency.STM) error {
		if tries > 2 {
			return fmt.Errorf("too many retries")
		}
		tries++
		stm.Get(a)
		stm.Put(b, "1")
		return nil
	}

	iso := concurrency.WithIsolation(concurrency.SerializableSnapshot)
	_, err = concurrency.NewSTM(cli, applyf, iso, concurrency.WithAbortContext(ctx))
	must(t, err)
	_, err = concurrency.NewSTM(cli, applyf, iso, concurrency.WithAbortContext(ctx))
	must(t, err)

	resp, err := cli.Get(ctx, b)
	must(t, err)
	if len(resp.Kvs) != 1 || resp.Kvs[0].Version != 2 {
		t.Fatalf("bad version. got %+v, expected version 2", resp)
	}
}

// ---- tests/integration/v3_election_test.go

// TestElectionWait tests if followers can correctly wait for elections.
func upTestElectionWait(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	leaders := 3
	followers := 3
	newClient := func() *clientv3.Client { return g.client(t) }
	name := relKey(ns, "test-election")

	electedc := make(chan string)
	var nextc []chan struct{}

	// wait for all elections
	donec := make(chan struct{})
	for i := 0; i < followers; i++ {
		nextc = append(nextc, make(chan struct{}))
		go func(ch chan struct{}) {
			for j := 0; j < leaders; j++ {
				session, err := concurrency.NewSession(newClient())
				if err != nil {
					t.Error(err)
					return
				}
				b := concurrency.NewElection(session, name)

				cctx, cancel := context.WithCancel(ctx)
				defer cancel()
				s, ok := <-b.Observe(cctx)
				if !ok {
					t.Errorf("could not observe election; channel closed")
					return
				}
				electedc <- string(s.Kvs[0].Value)
				// wait for next election round
				<-ch
				session.Orphan()
			}
			donec <- struct{}{}
		}(nextc[i])
	}

	// elect some leaders
	for i := 0; i < leaders; i++ {
		go func() {
			session, err := concurrency.NewSession(newClient())
			if err != nil {
				t.Error(err)
				return
			}
			defer session.Orphan()

			e := concurrency.NewElection(session, name)
			ev := fmt.Sprintf("electval-%v", time.Now().UnixNano())
			if err := e.Campaign(ctx, ev); err != nil {
				t.Errorf("failed volunteer (%v)", err)
				return
			}
			// wait for followers to accept leadership
			for j := 0; j < followers; j++ {
				s := <-electedc
				if s != ev {
					t.Errorf("wrong election value got %s, wanted %s", s, ev)
				}
			}
			// let next leader take over
			if err := e.Resign(ctx); err != nil {
				t.Errorf("failed resign (%v)", err)
			}
			// tell followers to start listening for next leader
			for j := 0; j < followers; j++ {
				nextc[j] <- struct{}{}
			}
		}()
	}

	// wait on followers
	for i := 0; i < followers; i++ {
		select {
		case <-donec:
		case <-ctx.Done():
			t.Fatalf("followers did not see every election: %v", ctx.Err())
		}
	}
}

// TestElectionSessionRecampaign ensures that campaigning twice on the same election
// with the same lock will Proclaim instead of deadlocking.
func upTestElectionSessionRecampaign(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	cli := g.client(t)

	session, err := concurrency.NewSession(cli)
	if err != nil {
		t.Error(err)
	}
	defer session.Orphan()

	e := concurrency.NewElection(session, relKey(ns, "test-elect"))
	must(t, e.Campaign(ctx, "abc"))
	e2 := concurrency.NewElection(session, relKey(ns, "test-elect"))
	must(t, e2.Campaign(ctx, "def"))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if resp := <-e.Observe(ctx); len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != "def" {
		t.Fatalf("expected value=%q, got response %v", "def", resp)
	}
}

// TestElectionOnPrefixOfExistingKey checks that a single
// candidate can be elected on a new key that is a prefix
// of an existing key. To wit, check for regression
// of bug #6278. https://github.com/etcd-io/etcd/issues/6278
func upTestElectionOnPrefixOfExistingKey(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	cli := g.client(t)
	_, err := cli.Put(ctx, relKey(ns, "testa"), "value")
	must(t, err)
	s, serr := concurrency.NewSession(cli)
	must(t, serr)
	e := concurrency.NewElection(s, relKey(ns, "test"))
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = e.Campaign(cctx, "abc")
	cancel()
	// after 5 seconds, deadlock results in
	// 'context deadline exceeded' here.
	must(t, err)
}

// TestElectionOnSessionRestart tests that a quick restart of leader (resulting
// in a new session with the same lease id) does not result in loss of
// leadership.
func upTestElectionOnSessionRestart(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	cli := g.client(t)
	name := relKey(ns, "test-elect")

	session, err := concurrency.NewSession(cli)
	must(t, err)

	e := concurrency.NewElection(session, name)
	must(t, e.Campaign(ctx, "abc"))

	// ensure leader is not lost to waiter on fail-over
	waitSession, werr := concurrency.NewSession(cli)
	must(t, werr)
	defer waitSession.Orphan()
	waitCtx, waitCancel := context.WithTimeout(ctx, 5*time.Second)
	defer waitCancel()
	go concurrency.NewElection(waitSession, name).Campaign(waitCtx, "123")

	// simulate restart by reusing the lease from the old session
	newSession, nerr := concurrency.NewSession(cli, concurrency.WithLease(session.Lease()))
	must(t, nerr)
	defer newSession.Orphan()

	newElection := concurrency.NewElection(newSession, name)
	must(t, newElection.Campaign(ctx, "def"))

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if resp := <-newElection.Observe(cctx); len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != "def" {
		t.Errorf("expected value=%q, got response %v", "def", resp)
	}
}

func upTestElectionObserveFreshResponsesOnProclaim(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	cli := g.client(t)

	session, err := concurrency.NewSession(cli)
	must(t, err)
	defer session.Orphan()

	e := concurrency.NewElection(session, relKey(ns, "test-elect"))
	must(t, e.Campaign(ctx, "abc"))

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()

	observeCh := e.Observe(cctx)

	mustObserve := func(want string, msg string) *clientv3.GetResponse {
		t.Helper()
		resp, ok := <-observeCh
		if !ok {
			t.Fatal(msg)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			t.Fatalf("observed %v, want one key valued %q", resp.Kvs, want)
		}
		return resp
	}

	assertFreshResponse := func(lhs, rhs *clientv3.GetResponse, msg string) {
		if lhs == rhs {
			t.Fatal(msg)
		}
	}

	firstResp := mustObserve("abc", "could not wait for first election; channel closed")

	must(t, e.Proclaim(ctx, "def"))
	secondResp := mustObserve("def", "could not wait for proclaimed election; channel closed")

	must(t, e.Proclaim(ctx, "ghi"))
	thirdResp := mustObserve("ghi", "could not wait for second proclaimed election; channel closed")

	assertFreshResponse(firstResp, secondResp, "Observe() reused the first GetResponse pointer")
	assertFreshResponse(firstResp, thirdResp, "Observe() reused the first GetResponse pointer")
	assertFreshResponse(secondResp, thirdResp, "Observe() reused the second GetResponse pointer")

	for i, c := range []struct {
		resp    *clientv3.GetResponse
		value   string
		version int64
	}{{firstResp, "abc", 1}, {secondResp, "def", 2}, {thirdResp, "ghi", 3}} {
		if string(c.resp.Kvs[0].Value) != c.value || c.resp.Kvs[0].Version != c.version {
			t.Errorf("response %d: value %q version %d, want %q version %d", i, c.resp.Kvs[0].Value, c.resp.Kvs[0].Version, c.value, c.version)
		}
	}
	if !(firstResp.Header.Revision < secondResp.Header.Revision) || !(secondResp.Header.Revision < thirdResp.Header.Revision) {
		t.Errorf("header revisions %d, %d, %d: want rising", firstResp.Header.Revision, secondResp.Header.Revision, thirdResp.Header.Revision)
	}
}

// ---- not upstream: the minimal reproduction of why etcdctl lock and
// concurrency.Mutex can deadlock on the gateway.
//
// Mutex.tryAcquire (client/v3/concurrency/mutex.go) commits
// If(CreateRevision(myKey) = 0).Then(Put(myKey), Get(pfx, WithFirstCreate))
// and takes myRev = the response's Header.Revision: it holds the lock iff
// the first key's CreateRevision == myRev, else waits for the deletion of
// the last key created before myRev. In etcd a transaction's header
// revision is its own write's. If it is later (a write of another client
// landed before the gateway read the branch's Get), the first locker
// thinks its own key is not the owner and waits for its own deletion,
// and the second waits for the first: neither ever runs (seen as
// TestEtcdctl/*/*/lock hanging with both keys present). This checks the
// rule directly: concurrent such transactions, each header revision equal
// to the create revision of the key it put.

// reproTxnRounds bounds the rounds of two concurrent transactions.
const reproTxnRounds = 40

func reproTxnHeaderIsItsWrite(t *testing.T, ctx context.Context, g *etcdGW, ns string) {
	cli := g.client(t)
	pfx := demoKey(ns, "m") + "/"
	for i := 0; i < reproTxnRounds; i++ {
		errs := make(chan error, 2)
		var wg sync.WaitGroup
		for j := 0; j < 2; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := fmt.Sprintf("%s%d-%d", pfx, i, j)
				resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
					Then(clientv3.OpPut(k, ""), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).Commit()
				if err != nil {
					errs <- err
					return
				}
				got, err := cli.Get(ctx, k)
				if err != nil || len(got.Kvs) != 1 {
					errs <- fmt.Errorf("get %s: %v %v", k, got, err)
					return
				}
				if c := got.Kvs[0].CreateRevision; c != resp.Header.Revision {
					errs <- fmt.Errorf("round %d: the txn that put %s answered header revision %d; the key's create revision is %d", i, k, resp.Header.Revision, c)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			return
		}
	}
}
