package sdk

// The calls a lockproxy makes on its own session of a cell, on behalf of
// all its clients: a read from the session's cache (the proxy's shared
// cache), and watches the session holds for them — one server-side watch
// per path and kind, however many clients wait on it. Applications use
// Get, GetW and ChildrenW instead.

import (
	"context"
	"encoding/json"
	"time"

	"github.com/lockservice/lockd/api"
)

// Watch is a one-shot watch a session holds for someone else: C receives
// exactly one event (or an SDK marker when the session ends), then closes.
type Watch struct {
	C <-chan api.Event
	s *Session
}

// Stop forgets the watch if it has not fired.
func (w *Watch) Stop() { w.s.dropWatch(w.C) }

// SharedGet reads path on cell through the client's session there (opened
// if needed): from the session's cache when it holds the value (hit), else
// from the leader, asking to cache it. The reply says whether the leader
// made it cacheable, and so will invalidate the session before it changes.
func (c *Client) SharedGet(ctx context.Context, cell, path string) (resp api.GetResponse, hit bool, err error) {
	cs, err := c.cellNamed(ctx, cell)
	if err != nil {
		return resp, false, err
	}
	s, err := c.session(ctx, cs)
	if err != nil {
		return resp, false, err
	}
	if r, ok := s.cached(path); ok {
		c.cacheCount.hits.Add(1)
		return r, true, nil
	}
	c.cacheCount.misses.Add(1)
	gen := s.beginCacheRead()
	req := api.ReadRequest{Path: path, Session: s.id, Secret: s.secret, Cache: true, CacheWindowMS: s.cacheWindow().Milliseconds()}
	err = c.do(ctx, cs, &call{route: api.RouteGet, req: req, resp: &resp, retryUnsure: true})
	if err != nil {
		if sessionGone(err) {
			s.expire(err)
		}
		return resp, false, err
	}
	if resp.Cacheable {
		s.store(path, resp, gen)
	}
	return resp, false, nil
}

// SharedWatchRead runs a watch-arming read (RouteGet or RouteChildren with
// req.Watch set) on the client's session on cell, and returns the reply's
// body as the cell sent it, the index the watch was armed at, and the
// watch.
func (c *Client) SharedWatchRead(ctx context.Context, cell, route string, req api.ReadRequest) ([]byte, uint64, *Watch, error) {
	cs, err := c.cellNamed(ctx, cell)
	if err != nil {
		return nil, 0, nil, err
	}
	s, gen, err := c.beginArming(ctx, cs)
	if err != nil {
		return nil, 0, nil, err
	}
	req.Session, req.Secret = s.id, s.secret
	var raw json.RawMessage
	var ix struct {
		Index uint64 `json:"index"`
	}
	err = c.do(ctx, cs, &call{route: route, req: req, resp: &raw, retryUnsure: true})
	ch := s.finishArming(err, func() (watchKey, uint64, bool) {
		_ = json.Unmarshal(raw, &ix)
		return watchKey{req.Path, req.Watch}, ix.Index, true
	}, gen)
	if err != nil {
		if sessionGone(err) {
			s.expire(err)
		}
		return nil, 0, nil, err
	}
	return raw, ix.Index, &Watch{C: ch, s: s}, nil
}

// SharedRearm arms a watch for each spec on the client's session on cell,
// as armed at its Since: the cell fires at once any whose node changed
// after it. It returns the watches in spec order and the cell's index.
func (c *Client) SharedRearm(ctx context.Context, cell string, specs []api.WatchSpec) ([]*Watch, uint64, error) {
	cs, err := c.cellNamed(ctx, cell)
	if err != nil {
		return nil, 0, err
	}
	s, err := c.session(ctx, cs)
	if err != nil {
		return nil, 0, err
	}
	ws := make([]*Watch, 0, len(specs))
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, 0, err
	}
	for _, sp := range specs {
		// Registered before the cell arms it: an event of an earlier
		// arming of the same key newer than Since fires it, rightly.
		w := &watch{key: watchKey{sp.Path, sp.Kind}, arm: sp.Since, ch: make(chan api.Event, 1)}
		s.w.byKey[w.key] = append(s.w.byKey[w.key], w)
		ws = append(ws, &Watch{C: w.ch, s: s})
	}
	s.mu.Unlock()
	var resp api.WatchResponse
	err = c.do(ctx, cs, &call{route: api.RouteWatch, req: api.WatchRequest{Cell: cell, Session: s.id, Secret: s.secret, Watches: specs}, resp: &resp, retryUnsure: true})
	if err != nil {
		for _, w := range ws {
			w.Stop()
		}
		if sessionGone(err) {
			s.expire(err)
		}
		return nil, 0, err
	}
	return ws, resp.Index, nil
}

// SharedCache is the client's live session on cell (0: none) and how long
// from now it may go on serving its cache (0: it may not now).
func (c *Client) SharedCache(cell string) (session uint64, left time.Duration) {
	cs, err := c.cellByName(cell)
	if err != nil {
		return 0, 0
	}
	s := c.liveSession(cs)
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, 0
	}
	return s.id, max(time.Until(s.clockLocked().cacheUntil()), 0)
}
