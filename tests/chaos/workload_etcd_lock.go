package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk/fence"
	"github.com/lockservice/lockd/tests/chaos/check"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
)

// etcdOnce is one acquisition of an etcd worker (a Mutex lock, a Lock
// service lock, a campaign), held and released.
type etcdOnce func(cli *clientv3.Client, es *etcdSession, name, path string, r *rand.Rand)

// Hold times of the etcd holders between their fenced writes: long
// enough that a second holder (a gateway answering a Lock early) overlaps
// by more than the interval checker's margin.
const (
	etcdWriteGapMin = 20 * time.Millisecond
	etcdWriteGapMax = 150 * time.Millisecond
)

// lockWorker runs once over and over on path with one client, on one
// session while its lease clock lives, a new one after.
func (l *etcdLoad) lockWorker(name, path string, once etcdOnce) {
	cli, err := l.client(name)
	if err != nil {
		l.e.logf("chaos: %v", err)
		return
	}
	defer cli.Close()
	r := l.e.rng(name)
	var es *etcdSession
	defer func() { l.closeSession(es) }()
	for i := 0; i < maxIterations && l.e.ctx.Err() == nil; i++ {
		if es != nil && es.ctx.Err() != nil {
			l.closeSession(es)
			es = nil
		}
		if es == nil {
			if es, err = l.newSession(cli, name); err != nil {
				es = nil
				sleepCtx(l.e.ctx, 100*time.Millisecond)
				continue
			}
		}
		once(cli, es, name, path, r)
		sleepCtx(l.e.ctx, jitter(r, 0, l.e.cfg.Think))
	}
}

// mutexOnce locks path with concurrency.Mutex.
func (l *etcdLoad) mutexOnce(cli *clientv3.Client, es *etcdSession, name, path string, r *rand.Rand) {
	m := concurrency.NewMutex(es.s, path)
	ctx, cancel := context.WithTimeout(es.ctx, l.e.cfg.LockWait)
	err := l.op(name, "etcd-mutex-lock", false, func() error { return m.Lock(ctx) })
	cancel()
	if err != nil {
		return
	}
	at := l.e.h.Now()
	l.count("grants: concurrency.Mutex")
	l.hold(cli, es, name, path, m.Key(), at, r, "etcd-mutex-unlock", m.Unlock)
}

// lockServiceOnce locks path with the Lock service (v3lockpb).
func (l *etcdLoad) lockServiceOnce(cli *clientv3.Client, es *etcdSession, name, path string, r *rand.Rand) {
	lk := v3lockpb.NewLockClient(cli.ActiveConnection())
	ctx, cancel := context.WithTimeout(es.ctx, l.e.cfg.LockWait)
	var resp *v3lockpb.LockResponse
	err := l.op(name, "etcd-lock", false, func() (err error) {
		resp, err = lk.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(path), Lease: int64(es.lease)})
		return err
	})
	cancel()
	if err != nil {
		return
	}
	at := l.e.h.Now()
	l.count("grants: Lock service")
	unlock := func(ctx context.Context) error {
		_, err := lk.Unlock(ctx, &v3lockpb.UnlockRequest{Key: resp.Key})
		return err
	}
	l.hold(cli, es, name, path, string(resp.Key), at, r, "etcd-unlock", unlock)
}

// hold records the grant of key (returned at at) as an interval live
// while the session's clock is, confirms and writes under it, then
// releases it.
func (l *etcdLoad) hold(cli *clientv3.Client, es *etcdSession, name, lock, key string, at time.Duration, r *rand.Rand, unlockKind string, unlock func(context.Context) error) {
	live, lcancel := context.WithCancel(es.ctx)
	hold := l.e.newHolding(lock, key, name, api.LockExclusive)
	hold.live(live, at)
	defer l.release(es, name, hold, lcancel, unlockKind, unlock)
	l.granted(cli, es, name, lock, key, 0, r, hold, live)
}

// release ends a holding and releases its key with unlock (an Unlock or a
// Resign); if that fails, the key stays while the session lives, so the
// session ends (its worker revokes the lease).
func (l *etcdLoad) release(es *etcdSession, name string, hold *holding, lcancel context.CancelFunc, kind string, unlock func(context.Context) error) {
	hold.release()
	lcancel()
	ctx, cancel := l.e.callCtx()
	defer cancel()
	if err := l.op(name, kind, false, func() error { return unlock(ctx) }); err != nil {
		es.cancel(errEtcdReleaseFailed)
	}
}

// granted is what an etcd holder does with a grant of key: read it
// through the gateway (its create revision is the fencing token, its
// lease must be the holder's) and with the SDK (the service's create
// index), confirm it holds, write under it, and confirm again. wantRev,
// if not 0, is the create revision the client library reported.
func (l *etcdLoad) granted(cli *clientv3.Client, es *etcdSession, name, lock, key string, wantRev int64, r *rand.Rand, hold *holding, live context.Context) {
	kv, ok := l.readGranted(cli, es, name, lock, key, wantRev, live)
	if !ok {
		return
	}
	node := etcdNode(lock, key, kv.CreateRevision)
	hold.setNode(node)
	if !l.confirmHeld(cli, name, lock, node, live, "after grant") {
		return
	}
	ctx, cancel := l.e.callCtx()
	var n api.Node
	// Local: the SDK may answer from its cache (the no-majority checker
	// leaves it out).
	err := l.op(name, "etcd-get-node", true, func() (err error) { n, err = l.sdkc.Get(ctx, key); return err })
	cancel()
	if err != nil {
		l.count("grants not written under: no answer")
		return
	}
	token := uint64(kv.CreateRevision)
	l.e.h.AddGrant(check.Grant{Lock: lock, Node: node, Mode: api.LockExclusive, Token: token, Session: uint64(es.lease),
		Owner: uint64(kv.Lease), CreateIndex: n.CreateIndex, Epoch: l.e.epoch, Worker: name, At: hold.tmplStart()})
	writes := 1 + r.IntN(3)
	for w := 0; w < writes; w++ {
		if !hold.live(live, l.e.h.Now()) {
			break
		}
		start := l.e.h.Now()
		err := l.e.res.Write(lock, token, uint64(es.lease), name, live)
		l.e.h.AddOp(check.Op{Worker: name, Kind: "fenced-write", Start: start, End: l.e.h.Now(), OK: err == nil, Local: true})
		if errors.Is(err, fence.ErrStaleToken) {
			l.e.logf("chaos: %s: holder of %s refused by the resource: %v", name, key, err)
		}
		sleepCtx(l.e.ctx, jitter(r, etcdWriteGapMin, etcdWriteGapMax))
	}
	l.confirmHeld(cli, name, lock, node, live, "before release")
}

// readGranted reads key through the gateway after its grant. A key
// already gone while the holder's clock is live is a grant on a node
// that was gone (etcd #11456); a key another lease owns is a violation;
// a key whose lease this gateway does not know (the client failed over
// to another gateway, which does not have its lease) is not written
// under.
func (l *etcdLoad) readGranted(cli *clientv3.Client, es *etcdSession, name, lock, key string, wantRev int64, live context.Context) (*kvOf, bool) {
	ctx, cancel := l.e.callCtx()
	defer cancel()
	var gr *clientv3.GetResponse
	if err := l.op(name, "etcd-get", false, func() (err error) { gr, err = cli.Get(ctx, key); return err }); err != nil {
		l.count("grants not written under: no answer")
		return nil, false
	}
	if len(gr.Kvs) == 0 {
		l.e.goneAtGrant(name, key, func() context.Context { return live })
		return nil, false
	}
	kv := &kvOf{CreateRevision: gr.Kvs[0].CreateRevision, Lease: gr.Kvs[0].Lease}
	switch {
	case wantRev != 0 && kv.CreateRevision != wantRev:
		l.e.h.AddViolation("grant-confirmed", fmt.Sprintf("%s: %s's create revision is %d per the gateway, the client library reported %d", name, key, kv.CreateRevision, wantRev))
		return nil, false
	case kv.Lease == int64(es.lease):
		return kv, true
	case kv.Lease != 0 && live.Err() == nil:
		l.e.h.AddViolation("grant-confirmed", fmt.Sprintf("%s was granted %s with lease %x but the gateway says lease %x owns it", name, key, es.lease, kv.Lease))
	default:
		l.count("grants not written under: lease not known to the gateway")
	}
	return nil, false
}

// kvOf is what granted needs of a key's KeyValue.
type kvOf struct {
	CreateRevision int64
	Lease          int64
}

// confirmHeld asks the gateway which key of lock holds (the first by
// create revision) and, for the Lock service's lock nodes, the service
// itself (LockState). A grant the service does not confirm while the
// holder's clock is live is a violation; it reports whether node (a key's
// incarnation, etcdNode) holds.
func (l *etcdLoad) confirmHeld(cli *clientv3.Client, name, lock, node string, live context.Context, when string) bool {
	first, answered := l.obsFirst(cli, name, lock)
	if !answered {
		return false
	}
	if lock == etcdLockPath {
		if _, _, ok := l.e.checkHeld(l.sdkc, name, lock, api.LockExclusive, node, when); !ok {
			return false
		}
	}
	if when != "after grant" {
		return first == node
	}
	l.e.h.Checked("grant-confirmed")
	if first != node && live.Err() == nil {
		l.e.h.AddViolation("grant-confirmed", fmt.Sprintf("%s was granted %s but the gateway's first key by create revision is %q", name, node, first))
	}
	return first == node
}
