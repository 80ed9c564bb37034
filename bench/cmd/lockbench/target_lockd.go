package main

import (
	"context"
	"time"

	"github.com/lockservice/lockd/sdk"
)

// lockdTarget runs the scenarios through the SDK: a locker or writer is
// one of the clients it opened (several share one client, as a service's
// goroutines share its client), a held session is one client's session on
// the demo cell.
type lockdTarget struct{ e *env }

// lockdWorker is an SDK client as a locker and a writer.
type lockdWorker struct{ c *sdk.Client }

func (w lockdWorker) lock(ctx context.Context, path string) (func(context.Context) error, error) {
	m := w.c.NewMutex(path)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (w lockdWorker) put(ctx context.Context, path string, value []byte) error {
	_, err := w.c.Put(ctx, path, value, sdk.MakeParents())
	return err
}

// spread is n workers over the clients, worker i on client i mod len.
func (t *lockdTarget) spread(ctx context.Context, conns, n int) ([]lockdWorker, func(), error) {
	cs, closeAll, err := t.e.clients(ctx, conns)
	if err != nil {
		return nil, nil, err
	}
	ws := make([]lockdWorker, n)
	for i := range ws {
		ws[i] = lockdWorker{cs[i%len(cs)]}
	}
	return ws, closeAll, nil
}

func (t *lockdTarget) lockers(ctx context.Context, conns, n int) ([]locker, func(), error) {
	ws, closeAll, err := t.spread(ctx, conns, n)
	out := make([]locker, len(ws))
	for i, w := range ws {
		out[i] = w
	}
	return out, closeAll, err
}

func (t *lockdTarget) writers(ctx context.Context, conns, n int) ([]writer, func(), error) {
	ws, closeAll, err := t.spread(ctx, conns, n)
	out := make([]writer, len(ws))
	for i, w := range ws {
		out[i] = w
	}
	return out, closeAll, err
}

// lockdSession is one client's session on the demo cell.
type lockdSession struct{ s *sdk.Session }

func (s lockdSession) lost() bool { return s.s.Err() != nil }

func (t *lockdTarget) sessions(ctx context.Context, n int, onOpen func(time.Duration)) ([]heldSession, func(), error) {
	clients, closeAll, err := t.e.sessionClients(ctx, n, "demo", onOpen)
	if err != nil {
		return nil, nil, err
	}
	out := make([]heldSession, n)
	for i, c := range clients {
		s, err := c.Session(ctx, "demo")
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		out[i] = lockdSession{s}
	}
	return out, closeAll, nil
}

func (t *lockdTarget) watchEvents(ctx context.Context) (float64, error) {
	return metricSum(ctx, t.e.endpoints, "lockd_watch_events_total", `cell="demo"`)
}

func (t *lockdTarget) keepAlives(ctx context.Context) (float64, error) {
	return metricSum(ctx, t.e.endpoints, "lockd_keepalives_total", `cell="demo"`)
}

func (t *lockdTarget) version(ctx context.Context) (string, error) {
	var last error
	for _, ep := range t.e.endpoints {
		st, err := sdk.FetchStatus(ctx, ep, sdk.Access{AuthToken: t.e.adminToken})
		if err == nil {
			return st.Version, nil
		}
		last = err
	}
	return "", last
}
