package chaos

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// etcdRenewsPerTTL is how many of its own KeepAlives the lease clock
// sends per TTL (clientv3 sends its own every TTL/3 too): the gateway
// answers the TTL left floored to seconds, so a renewal every TTL/3 would
// leave the clock little slack for a slow one.
const etcdRenewsPerTTL = 5

// Why an etcd session's clock stopped (the report counts them).
var (
	errEtcdDone      = errors.New("etcd session Done")
	errEtcdClock     = errors.New("lease clock ran out")
	errEtcdLeaseGone = errors.New("lease not found at the gateway")
	errEtcdClosed    = errors.New("closed by its worker")
	// errEtcdReleaseFailed: an Unlock or Resign failed; the key stays as
	// long as the session does, so the worker ends the session (as a
	// careful etcd user would: else its next Lock finds its own key first
	// in line and the others starve).
	errEtcdReleaseFailed = errors.New("release failed: session ended")
)

// etcdSession is a concurrency.Session with a lease clock: ctx is live
// while the client may believe its lease holds, and is cancelled (with
// its cause) when the session's Done() closes, when a KeepAlive is
// answered "not found", or when the TTL the last confirmed KeepAlive
// answered has passed since that KeepAlive was sent (the grant's TTL from
// the grant's send, before any). The gateway answers a KeepAlive with
// what every cell session of the lease is still guaranteed, counted from
// its own renewal's send (docs/etcd.md, "KeepAlive"); this client's send
// is earlier still, so its clock never runs past the cell's.
type etcdSession struct {
	s      *concurrency.Session
	lease  clientv3.LeaseID
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
}

// newSession grants a lease of l.ttl and makes a session of it.
func (l *etcdLoad) newSession(cli *clientv3.Client, name string) (*etcdSession, error) {
	ctx, cancel := l.e.callCtx()
	defer cancel()
	sent := time.Now()
	var gr *clientv3.LeaseGrantResponse
	err := l.op(name, "etcd-grant", true, func() (err error) { gr, err = cli.Grant(ctx, l.ttl); return err })
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithLease(gr.ID), concurrency.WithTTL(int(gr.TTL)), concurrency.WithContext(l.e.ctx))
	if err != nil {
		return nil, err
	}
	es := &etcdSession{s: s, lease: gr.ID}
	es.ctx, es.cancel = context.WithCancelCause(l.e.ctx)
	deadline := sent.Add(time.Duration(gr.TTL) * time.Second)
	stop := time.AfterFunc(time.Until(deadline), func() { es.cancel(errEtcdClock) })
	es.wg.Add(2)
	go func() {
		defer es.wg.Done()
		select {
		case <-s.Done():
			es.cancel(errEtcdDone)
		case <-es.ctx.Done():
		}
	}()
	go func() {
		defer es.wg.Done()
		l.renew(cli, es, deadline, stop)
	}()
	return es, nil
}

// renew keeps the lease clock: a KeepAlive every TTL/etcdRenewsPerTTL,
// each confirmed one moving the deadline to its send plus the TTL it was
// answered, until the session's ctx ends.
func (l *etcdLoad) renew(cli *clientv3.Client, es *etcdSession, deadline time.Time, stop *time.Timer) {
	defer stop.Stop()
	every := time.Duration(l.ttl) * time.Second / etcdRenewsPerTTL
	for i := 0; i < maxIterations; i++ {
		sleepCtx(es.ctx, every)
		if es.ctx.Err() != nil {
			return
		}
		sent := time.Now()
		kctx, kcancel := context.WithTimeout(es.ctx, every)
		resp, err := cli.KeepAliveOnce(kctx, es.lease)
		kcancel()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			es.cancel(errEtcdLeaseGone)
			return
		case err != nil || resp.TTL <= 0:
			continue // unknown: the clock runs on from the last confirmed one
		}
		d := sent.Add(time.Duration(resp.TTL) * time.Second)
		if !d.After(deadline) {
			continue
		}
		if !stop.Stop() {
			return // the clock ran out first
		}
		deadline = d
		stop.Reset(time.Until(deadline))
	}
}

// close ends the session: its clock stops, and its lease is revoked (its
// keys go) if the gateway still has it.
func (l *etcdLoad) closeSession(es *etcdSession) {
	if es == nil {
		return
	}
	es.cancel(errEtcdClosed)
	cause := context.Cause(es.ctx)
	if !errors.Is(cause, errEtcdClosed) && l.e.ctx.Err() == nil {
		l.count("sessions ended: " + cause.Error())
	}
	_ = es.s.Close() // revokes, bounded by the TTL
	es.wg.Wait()
}
