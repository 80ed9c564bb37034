package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/chaos/check"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// electOnce campaigns on path with concurrency.Election; once it leads,
// Leader() must name its key while its clock is live; it writes under the
// key's create revision (Election.Rev, the fencing token) and resigns.
func (l *etcdLoad) electOnce(cli *clientv3.Client, es *etcdSession, name, path string, r *rand.Rand) {
	el := concurrency.NewElection(es.s, path)
	ctx, cancel := context.WithTimeout(es.ctx, l.e.cfg.LockWait)
	err := l.op(name, "etcd-campaign", false, func() error { return el.Campaign(ctx, name) })
	cancel()
	if err != nil {
		return
	}
	at := l.e.h.Now()
	l.count("grants: concurrency.Election")
	key, rev := el.Key(), el.Rev()
	live, lcancel := context.WithCancel(es.ctx)
	hold := l.e.newHolding(path, key, name, api.LockExclusive)
	hold.live(live, at)
	defer l.release(es, name, hold, lcancel, "etcd-resign", el.Resign)
	if !l.leads(el, name, path, key, live) {
		return
	}
	l.granted(cli, es, name, path, key, rev, r, hold, live)
}

// leads asks Leader() and records what it names (holding at the read's
// index); a leader other than key while the campaigner's clock is live is
// a violation. It reports whether Leader() named key.
func (l *etcdLoad) leads(el *concurrency.Election, name, path, key string, live context.Context) bool {
	ctx, cancel := l.e.callCtx()
	defer cancel()
	var lr *clientv3.GetResponse
	if err := l.op(name, "etcd-leader", false, func() (err error) { lr, err = el.Leader(ctx); return err }); err != nil || len(lr.Kvs) == 0 {
		return false // no answer, or no leader (ErrElectionNoLeader): its key is gone
	}
	leader := string(lr.Kvs[0].Key)
	l.e.h.AddLockObs(check.LockObs{Lock: path, Node: etcdNode(path, leader, lr.Kvs[0].CreateRevision), Mode: api.LockExclusive,
		Index: api.TokenIndex(uint64(lr.Header.Revision)), Held: true, Source: "etcd-leader"})
	l.e.h.Checked("election")
	if leader != key && live.Err() == nil {
		l.e.h.AddViolation("election", fmt.Sprintf("%s leads (key %s) but Leader() names %s (value %q)", name, key, leader, lr.Kvs[0].Value))
	}
	return leader == key
}
