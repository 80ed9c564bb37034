package sdk

import (
	"context"
	"errors"
	"strings"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// CreateOption modifies a Create.
type CreateOption interface{ applyCreate(*api.CreateRequest) }

// PutOption modifies a Put.
type PutOption interface{ applyPut(*api.PutRequest) }

// DeleteOption modifies a Delete.
type DeleteOption interface{ applyDelete(*api.DeleteRequest) }

type createFunc func(*api.CreateRequest)

func (f createFunc) applyCreate(r *api.CreateRequest) { f(r) }

// Ephemeral makes Create's node ephemeral: owned by the cell's session
// (opened if needed) and deleted when the session ends.
func Ephemeral() CreateOption { return createFunc(func(r *api.CreateRequest) { r.Ephemeral = true }) }

// Sequential makes Create append a 10-digit per-parent counter to the
// node's name; the reply's Node.Path is the name it got.
func Sequential() CreateOption { return createFunc(func(r *api.CreateRequest) { r.Sequential = true }) }

// ParentsOption is returned by MakeParents and NoParents; it applies to
// Create and Put.
type ParentsOption struct{ make bool }

// MakeParents makes Create or Put create missing parent nodes (persistent,
// empty). It is the default, as for lockctl put: kept so that code
// written when it was not still says what it means.
func MakeParents() ParentsOption { return ParentsOption{make: true} }

// NoParents makes Create or Put fail with no_node when the parent does
// not exist, instead of creating it and every missing ancestor (lockctl
// put --no-parents).
func NoParents() ParentsOption { return ParentsOption{make: false} }

func (o ParentsOption) applyCreate(r *api.CreateRequest) { r.MakeParents = o.make }
func (o ParentsOption) applyPut(r *api.PutRequest)       { r.MakeParents = o.make }

// noParentsHint adds to a no_node refusal of a write sent with NoParents
// how to get the other behaviour: the default creates missing parents.
func noParentsHint(err error, makeParents bool) error {
	var ae *api.Error
	if makeParents || !errors.As(err, &ae) || ae.Code != api.CodeNoNode || !strings.HasPrefix(ae.Message, "parent ") {
		return err // not a missing parent (a compare-and-set on a missing node)
	}
	hinted := *ae
	hinted.Message += " (asked not to create parents: sdk.NoParents or lockctl put --no-parents; without it a Put or Create creates them)"
	return &hinted
}

// VersionOption is returned by WithVersion; it applies to Put and Delete.
type VersionOption struct{ v uint64 }

// WithVersion makes Put a compare-and-set, and Delete conditional: the call
// succeeds only if the node's current version is v, else fails with
// version_mismatch. For Put, WithVersion(0) means the node must not exist
// (as MustNotExist).
func WithVersion(v uint64) VersionOption { return VersionOption{v} }

func (o VersionOption) applyPut(r *api.PutRequest)       { v := o.v; r.Version = &v }
func (o VersionOption) applyDelete(r *api.DeleteRequest) { v := o.v; r.Version = &v }

// MustNotExist makes Put create the node only if it does not exist; else
// it fails with node_exists.
func MustNotExist() PutOption { return WithVersion(0) }

func checkValue(v []byte) error {
	if len(v) > api.MaxValueSize {
		return api.Errorf(api.CodeValueTooLarge, "value is %d bytes, limit %d", len(v), api.MaxValueSize)
	}
	return nil
}

// Create creates the node at path with value, and any missing parent
// (persistent, empty; NoParents to refuse instead). Ephemeral nodes (and
// lock nodes) are owned by the cell's session, opened if needed. It fails
// with node_exists if the path exists.
func (c *Client) Create(ctx context.Context, path string, value []byte, opts ...CreateOption) (api.CreateResponse, error) {
	req := api.CreateRequest{Path: path, Value: value, MakeParents: !mutant.On(mutant.ParentsDefault)}
	for _, o := range opts {
		o.applyCreate(&req)
	}
	resp, err := c.create(ctx, &req)
	return resp, noParentsHint(err, req.MakeParents)
}

func (c *Client) create(ctx context.Context, req *api.CreateRequest) (api.CreateResponse, error) {
	var resp api.CreateResponse
	if err := api.ValidatePath(req.Path); err != nil {
		return resp, err
	}
	if err := checkValue(req.Value); err != nil {
		return resp, err
	}
	needSession := req.Ephemeral || req.Lock != api.LockNone
	err := c.routed(ctx, req.Path, func(cs *cellState) error {
		req.WriteHeader = api.WriteHeader{} // a fresh request id on the new cell's session
		return c.write(ctx, cs, needSession, &req.WriteHeader, api.RouteCreate, req, &resp)
	})
	return resp, err
}

// Put writes value to the persistent node at path, creating it and any
// missing parent if it does not exist (NoParents to refuse a missing
// parent; see WithVersion and MustNotExist for conditional puts). It
// returns the node as written.
func (c *Client) Put(ctx context.Context, path string, value []byte, opts ...PutOption) (api.Node, error) {
	req := api.PutRequest{Path: path, Value: value, MakeParents: !mutant.On(mutant.ParentsDefault)}
	for _, o := range opts {
		o.applyPut(&req)
	}
	if req.Value == nil {
		req.Value = []byte{} // the wire type has no omitempty: send "" not null
	}
	var resp api.WriteResponse
	if err := api.ValidatePath(path); err != nil {
		return resp.Node, err
	}
	if err := checkValue(value); err != nil {
		return resp.Node, err
	}
	err := c.routed(ctx, path, func(cs *cellState) error {
		req.WriteHeader = api.WriteHeader{}
		return c.write(ctx, cs, false, &req.WriteHeader, api.RoutePut, &req, &resp)
	})
	return resp.Node, noParentsHint(err, req.MakeParents)
}

// Delete deletes the childless node at path (see WithVersion).
func (c *Client) Delete(ctx context.Context, path string, opts ...DeleteOption) error {
	req := api.DeleteRequest{Path: path}
	for _, o := range opts {
		o.applyDelete(&req)
	}
	var resp api.WriteResponse
	return c.routed(ctx, path, func(cs *cellState) error {
		req.WriteHeader = api.WriteHeader{}
		return c.write(ctx, cs, false, &req.WriteHeader, api.RouteDelete, &req, &resp)
	})
}

// write sends a write to cs. With a session (needed, or merely live) it
// carries the session's next request id, so it is retried safely; without
// one it is retried only when it certainly did not arrive.
//
// A session write the cell refuses for the session alone (expired, or
// unknown) is resent without the session when it needs none — but only if
// no attempt under its request id can have been applied: once one may have
// reached the cell (its reply lost, or answered unavailable), resending
// could apply it twice or fail it falsely (a CAS's version_mismatch, a
// create's node_exists), so the write fails with ErrOutcomeUnknown.
func (c *Client) write(ctx context.Context, cs *cellState, needSession bool, hdr *api.WriteHeader, route string, req, resp any) error {
	s, err := c.sessionFor(ctx, cs, needSession)
	if err != nil {
		return err
	}
	if s != nil {
		id, err := s.reqs.begin(ctx)
		if err != nil {
			return err
		}
		reached, err := s.sendWrite(ctx, id, hdr, route, req, resp)
		s.reqs.end(id)
		if !sessionGone(err) || needSession {
			return err
		}
		if reached {
			return outcomeUnknown(nil, "%s: an earlier attempt under request %d of session %d may have been applied before the session ended (%v)", route, id, s.id, err)
		}
		// The cell refused every attempt for the session alone, so the
		// write was not applied; it does not need the session: send it
		// without.
	}
	*hdr = api.WriteHeader{}
	return c.do(ctx, cs, &call{route: route, req: req, resp: resp, write: true})
}

// write sends a write under the session's next request id. Every attempt
// carries the same id and a fresh ack.
func (s *Session) write(ctx context.Context, hdr *api.WriteHeader, route string, req, resp any) error {
	id, err := s.reqs.begin(ctx)
	if err != nil {
		return err
	}
	defer s.reqs.end(id)
	return s.writeID(ctx, id, hdr, route, req, resp)
}

// writeID sends a write under request id id, which the caller got from
// s.reqs.begin and ends once the write has had its reply (or hands on to
// a cleanup). Resending the same id returns the first attempt's result.
func (s *Session) writeID(ctx context.Context, id uint64, hdr *api.WriteHeader, route string, req, resp any) error {
	_, err := s.sendWrite(ctx, id, hdr, route, req, resp)
	return err
}

// sendWrite is writeID that also reports whether an attempt may have
// reached the cell without a definite answer (so may have been applied).
func (s *Session) sendWrite(ctx context.Context, id uint64, hdr *api.WriteHeader, route string, req, resp any) (reached bool, err error) {
	hdr.Session, hdr.Secret, hdr.Request = s.id, s.secret, id
	cl := &call{
		route:       route,
		req:         req,
		resp:        resp,
		retryUnsure: true,
		write:       true,
		before:      func() { hdr.Ack = s.reqs.ack() },
	}
	err = s.c.do(ctx, s.cs, cl)
	if sessionGone(err) {
		s.expire(err)
	}
	if del, ok := req.(*api.DeleteRequest); ok && (err == nil || cl.reached) {
		var index uint64
		if wr, ok := resp.(*api.WriteResponse); ok {
			index = wr.Index
		}
		s.mu.Lock()
		rearm := s.w.ownDelete(del.Path, index, err == nil)
		s.mu.Unlock()
		if rearm {
			s.signalRearm()
		}
	}
	return cl.reached, err
}

// Get reads the node at path, linearizably. It fails with no_node if the
// node does not exist.
//
// When the client has a session on the path's cell (Client.Session, or
// one a lock or watch opened) and caching is on (Config.NoCache unset),
// the value is cached: later Gets are answered from memory, with no RPC,
// until the cell invalidates it — which it does, and waits for, before
// any change of the node commits — while the session's lease is
// confirmed. So a cached read is never staler than a read from the
// leader would be.
func (c *Client) Get(ctx context.Context, path string) (api.Node, error) {
	var resp api.GetResponse
	if err := c.routed(ctx, path, func(cs *cellState) error {
		var s *Session
		if !c.cfg.NoCache {
			s = c.liveSession(cs)
		}
		if s != nil {
			if r, ok := s.cached(path); ok {
				c.cacheCount.hits.Add(1)
				resp = r
				return nil
			}
		}
		c.cacheCount.misses.Add(1)
		req := api.ReadRequest{Path: path}
		var gen uint64
		if s != nil {
			gen = s.beginCacheRead()
			req.Session, req.Secret, req.Cache, req.CacheWindowMS = s.id, s.secret, true, s.cacheWindow().Milliseconds()
		}
		if err := c.do(ctx, cs, &call{route: api.RouteGet, req: req, resp: &resp, retryUnsure: true}); err != nil {
			return err
		}
		if resp.Shared {
			c.cacheCount.shared.Add(1)
		}
		if s != nil && resp.Cacheable {
			s.store(path, resp, gen)
		}
		return nil
	}); err != nil {
		return api.Node{}, err
	}
	if !resp.Exists {
		return api.Node{}, api.Errorf(api.CodeNoNode, "%s does not exist", path)
	}
	return resp.Node, nil
}

// GetW reads the node at path and, in the same call, arms a one-shot data
// watch on it on the cell's session (opened if needed). A missing node is
// not an error: exists is false and the watch fires when it is created.
// The channel receives exactly one event — the change, a resync (re-read),
// or EventSessionExpired/EventSessionClosed — and is then closed.
func (c *Client) GetW(ctx context.Context, path string) (node api.Node, exists bool, ch <-chan api.Event, err error) {
	var resp api.GetResponse
	err = c.routed(ctx, path, func(cs *cellState) (err error) {
		ch, err = c.watchRead(ctx, cs, api.RouteGet,
			func(sid uint64, secret string) any {
				return api.ReadRequest{Path: path, Session: sid, Secret: secret, Watch: api.WatchData}
			},
			&resp,
			func() (watchKey, uint64, bool) { return watchKey{path, api.WatchData}, resp.Index, true })
		return err
	})
	if err != nil {
		return api.Node{}, false, nil, err
	}
	return resp.Node, resp.Exists, ch, nil
}

// Children lists the names of the children of path (sorted, sequential
// ones in sequence order) and returns the node itself.
func (c *Client) Children(ctx context.Context, path string) ([]string, api.Node, error) {
	var resp api.ChildrenResponse
	if err := c.routed(ctx, path, func(cs *cellState) error {
		return c.do(ctx, cs, &call{route: api.RouteChildren, req: api.ReadRequest{Path: path}, resp: &resp, retryUnsure: true})
	}); err != nil {
		return nil, api.Node{}, err
	}
	return resp.Children, resp.Node, nil
}

// ChildrenW is Children that also arms a one-shot children watch on path,
// on the cell's session: it fires when a child is created or deleted, or
// the node is deleted. The channel behaves as GetW's.
func (c *Client) ChildrenW(ctx context.Context, path string) ([]string, api.Node, <-chan api.Event, error) {
	var resp api.ChildrenResponse
	var ch <-chan api.Event
	err := c.routed(ctx, path, func(cs *cellState) (err error) {
		ch, err = c.watchRead(ctx, cs, api.RouteChildren,
			func(sid uint64, secret string) any {
				return api.ReadRequest{Path: path, Session: sid, Secret: secret, Watch: api.WatchChildren}
			},
			&resp,
			func() (watchKey, uint64, bool) { return watchKey{path, api.WatchChildren}, resp.Index, true })
		return err
	})
	if err != nil {
		return nil, api.Node{}, nil, err
	}
	return resp.Children, resp.Node, ch, nil
}

// watchRead runs a read that arms a watch on the cell's session. After a
// successful read, armed reports which watch the read armed (key, the
// index it was armed at, and false if none); watchRead registers it so
// events that raced ahead of the read's reply are not lost.
func (c *Client) watchRead(ctx context.Context, cs *cellState, route string, build func(session uint64, secret string) any, resp any, armed func() (watchKey, uint64, bool)) (<-chan api.Event, error) {
	s, gen, err := c.beginArming(ctx, cs)
	if err != nil {
		return nil, err
	}
	err = c.do(ctx, cs, &call{route: route, req: build(s.id, s.secret), resp: resp, retryUnsure: true})
	ch := s.finishArming(err, armed, gen)
	if err != nil {
		if sessionGone(err) {
			s.expire(err)
		}
		return nil, err
	}
	return ch, nil
}

// armRead runs a watch-arming read on this session (never another one the
// client may open later): armed names the watch the read armed, as for
// watchRead. It fails with the session's error once it has ended.
func (s *Session) armRead(ctx context.Context, route string, req, resp any, armed func() (watchKey, uint64, bool)) (<-chan api.Event, error) {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	s.w.beginRead()
	gen := s.gen
	s.mu.Unlock()
	err := s.c.do(ctx, s.cs, &call{route: route, req: req, resp: resp, retryUnsure: true})
	ch := s.finishArming(err, armed, gen)
	if err != nil {
		if sessionGone(err) {
			s.expire(err)
		}
		return nil, err
	}
	return ch, nil
}

// getW is GetW on this session.
func (s *Session) getW(ctx context.Context, path string) (api.GetResponse, <-chan api.Event, error) {
	var resp api.GetResponse
	ch, err := s.armRead(ctx, api.RouteGet, api.ReadRequest{Path: path, Session: s.id, Secret: s.secret, Watch: api.WatchData}, &resp,
		func() (watchKey, uint64, bool) { return watchKey{path, api.WatchData}, resp.Index, true })
	return resp, ch, err
}

// beginArming returns the cell's live session (opened if needed) with a
// watch-arming call noted as in flight; finishArming must follow. gen is
// the session's fail-over count at the start.
func (c *Client) beginArming(ctx context.Context, cs *cellState) (*Session, uint64, error) {
	for attempt := 0; ; attempt++ {
		s, err := c.session(ctx, cs)
		if err != nil {
			return nil, 0, err
		}
		s.mu.Lock()
		if s.err == nil {
			s.w.beginRead()
			gen := s.gen
			s.mu.Unlock()
			return s, gen, nil
		}
		err = s.err
		s.mu.Unlock()
		if attempt == 2 { // it keeps ending as soon as it opens
			return nil, 0, err
		}
	}
}

// finishArming ends a call begun with beginArming: if it succeeded, it
// registers the watch armed() names, if any.
func (s *Session) finishArming(err error, armed func() (watchKey, uint64, bool), gen uint64) <-chan api.Event {
	var (
		key watchKey
		arm uint64
		ok  bool
	)
	if err == nil {
		key, arm, ok = armed()
	}
	return s.finishRead(key, arm, ok, gen)
}

// finishRead registers the watch a read armed (see watchSet.finishRead).
func (s *Session) finishRead(key watchKey, arm uint64, ok bool, gen uint64) <-chan api.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		// The session ended while the read was in flight: the watch is
		// already void.
		s.w.pending--
		if !ok {
			return nil
		}
		marker := EventSessionExpired
		if s.err == ErrClosed {
			marker = EventSessionClosed
		}
		ch := make(chan api.Event, 1)
		ch <- api.Event{Type: marker, Path: key.path, Kind: key.kind}
		close(ch)
		return ch
	}
	ch, rearm := s.w.finishRead(key, arm, ok, gen != s.gen)
	if rearm {
		s.signalRearm()
	}
	return ch
}
