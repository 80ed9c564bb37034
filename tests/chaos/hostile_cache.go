package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// hsession is a session the attacker opened, and where it talks to it:
// a lockd (following the leader) or one proxy.
type hsession struct {
	sessionRef
	target  string
	viaProx bool
	auth    string
}

// leaderHint is the leader a not_leader reply names ("" if none).
func leaderHint(status int, body []byte) string {
	if status != http.StatusServiceUnavailable {
		return ""
	}
	var er api.ErrorResponse
	if json.Unmarshal(body, &er) != nil || er.Error == nil {
		return ""
	}
	return er.Error.Leader
}

// sessionDo sends one request of s's, recorded as kind; a lockd that is
// not the leader's hint is followed (up to 3 times).
func (x *hostile) sessionDo(ctx context.Context, s *hsession, kind, op, route string, expect check.Expect, req any) (int, []byte) {
	body := jsonBody(req)
	var (
		status int
		b      []byte
	)
	for hop := 0; hop < 3 && ctx.Err() == nil; hop++ {
		status, b = x.do(ctx, check.HostileReply{Kind: kind, Op: op, Target: s.target, Route: route, Auth: "the reader's token", Expect: expect}, http.MethodPost, body, s.auth)
		if s.viaProx || api.CodeOf(clusterErr(status, b)) != api.CodeNotLeader {
			break
		}
		l := leaderHint(status, b)
		if l == "" || l == s.target {
			l = x.nextLockd(s.target) // no leader known there: ask another
		}
		s.target = l
	}
	return status, b
}

// nextLockd is the lockd after addr in the list.
func (x *hostile) nextLockd(addr string) string {
	for i, l := range x.lockds {
		if l == addr {
			return x.lockds[(i+1)%len(x.lockds)]
		}
	}
	return x.lockds[0]
}

// openSession opens a session of auth's tenant on the workloads' cell at
// target (a lockd: the leader is found from there; or a proxy).
func (x *hostile) openSession(ctx context.Context, target, auth, kind string, viaProxy bool) (*hsession, error) {
	s := &hsession{target: target, viaProx: viaProxy, auth: auth}
	status, b := x.sessionDo(ctx, s, kind, "session-open", api.RouteSessionOpen, check.ExpectAny, api.OpenSessionRequest{Cell: cellName})
	if status/100 != 2 {
		return nil, fmt.Errorf("open a session at %s: %d %s", target, status, b)
	}
	if err := json.Unmarshal(b, &s.sessionRef); err != nil || s.Secret == "" {
		return nil, fmt.Errorf("open a session at %s: reply %s", target, b)
	}
	return s, nil
}

// cacheBlockLoop is hole 5 of issue 22, over and over: a session of
// mallory's caches the workloads' config nodes, their lock nodes and the
// lock nodes next to be created, then keeps its session alive with
// KeepAlives that never acknowledge an invalidation, for an attack phase;
// then it closes the session and rests. Phases alternate between a lockd
// (direct) and each proxy. Each phase also caches many distinct missing
// paths (hole 7), reads outside its grant through the cache (hole 4),
// and, through a proxy, floods one path with watches (hole 6).
func (x *hostile) cacheBlockLoop(ctx context.Context) {
	window := api.CacheWindowFor(x.e.cfg.Lease)
	attack, rest := 3*window, window
	for phase := 0; phase < hostileMaxRequests && ctx.Err() == nil; phase++ {
		via := phase % (1 + len(x.proxies))
		target, viaProxy := x.lockds[phase%len(x.lockds)], via > 0
		if viaProxy {
			target = x.proxies[via-1]
		}
		s, err := x.openSession(ctx, target, "Bearer "+x.readerToken, "cache-block", viaProxy)
		if err != nil {
			x.e.logf("chaos: hostile: cache-block: %v", err)
			sleepCtx(ctx, time.Second)
			continue
		}
		start := x.e.h.Now()
		cached := x.cacheTargets(ctx, s, phase)
		kas, why := x.holdWithoutAcks(ctx, s, time.Now().Add(attack))
		x.e.logf("chaos: hostile: cache-block via %s (session %d): %d nodes cached, %d KeepAlives without an ack, then %s", target, s.Session, cached, kas, why)
		x.sessionDo(context.WithoutCancel(ctx), s, "cache-block", "session-close", api.RouteSessionClose, check.ExpectAny,
			api.CloseSessionRequest{Cell: cellName, Session: s.Session, Secret: s.Secret})
		x.mu.Lock()
		x.windows = append(x.windows, check.Window{Start: start, End: x.e.h.Now(), What: "cache-block via " + target})
		x.mu.Unlock()
		sleepCtx(ctx, rest)
	}
}

// cacheTargets makes s a cacher of every node a workload writes, and of
// the lock nodes next to be made; and of missing paths, and outside its
// grant.
func (x *hostile) cacheTargets(ctx context.Context, s *hsession, phase int) (cached int) {
	get := func(kind, path string, expect check.Expect) {
		cached++
		status, b := x.sessionDo(ctx, s, kind, "cached-get", api.RouteGet, expect, api.ReadRequest{Path: path, Session: s.Session, Secret: s.Secret, Cache: true, CacheWindowMS: api.CacheWindow.Milliseconds()})
		var r api.GetResponse
		if status/100 == 2 && json.Unmarshal(b, &r) == nil && r.Cacheable {
			x.mu.Lock()
			x.cacheable++
			x.mu.Unlock()
		}
	}
	for k := 0; k < x.e.cfg.ConfigKeys; k++ {
		get("cache-block", fmt.Sprintf("%s/k%d", configBase, k), check.ExpectAny)
	}
	locks := []string{sharedLock, electionPath, takeoverLock}
	for l := 0; l < x.e.cfg.Locks; l++ {
		locks = append(locks, fmt.Sprintf("%s/l%d", lockBase, l))
	}
	for _, lock := range locks {
		for _, p := range x.lockNodes(ctx, s, lock) {
			get("cache-block", p, check.ExpectAny)
		}
	}
	get("reader-outside-read", sidePrefix+"/v", check.ExpectRefused)
	for i := 0; i < 200 && ctx.Err() == nil; i++ {
		get("cache-missing", fmt.Sprintf("%s/%d-%d", hostileMiss, phase, i), check.ExpectAny)
	}
	if s.viaProx {
		x.watchFlood(ctx, s)
	}
	return cached
}

// lockNodes are lock's children now and the next few sequence numbers of
// either mode: the nodes whose create and delete (Lock, Unlock) a
// cacher holds up.
func (x *hostile) lockNodes(ctx context.Context, s *hsession, lock string) []string {
	status, b := x.sessionDo(ctx, s, "cache-block", "children", api.RouteChildren, check.ExpectAny, api.ReadRequest{Path: lock})
	var cr api.ChildrenResponse
	if status/100 != 2 || json.Unmarshal(b, &cr) != nil {
		return nil
	}
	var out []string
	var top uint64
	for _, c := range cr.Children {
		out = append(out, api.Join(lock, c))
		if i := strings.LastIndexByte(c, '-'); i >= 0 {
			if n, err := strconv.ParseUint(c[i+1:], 10, 64); err == nil {
				top = max(top, n)
			}
		}
	}
	for n := top + 1; n <= top+3; n++ {
		out = append(out, api.Join(lock, fmt.Sprintf("w-%010d", n)), api.Join(lock, fmt.Sprintf("r-%010d", n)))
	}
	return out
}

// watchFlood arms many watches on one path with distinct since values
// through the proxy (hole 6).
func (x *hostile) watchFlood(ctx context.Context, s *hsession) {
	for req := 0; req < 8 && ctx.Err() == nil; req++ {
		specs := make([]api.WatchSpec, 128)
		for i := range specs {
			specs[i] = api.WatchSpec{Path: configBase + "/k0", Kind: api.WatchData, Since: uint64(req*len(specs) + i + 1)}
		}
		x.sessionDo(ctx, s, "watch-flood", "watch", api.RouteWatch, check.ExpectAny,
			api.WatchRequest{Cell: cellName, Session: s.Session, Secret: s.Secret, Watches: specs})
	}
}

// holdWithoutAcks keeps s alive until until with KeepAlives that
// acknowledge nothing (the cell's events nor the proxy's).
func (x *hostile) holdWithoutAcks(ctx context.Context, s *hsession, until time.Time) (n int, why string) {
	for ; n < hostileMaxRequests && ctx.Err() == nil && time.Now().Before(until); n++ {
		// A KeepAlive with unacknowledged events is answered at once:
		// pace them (the lease is seconds long).
		next := time.Now().Add(keepAlivePace)
		status, b := x.sessionDo(ctx, s, "cache-block", "keepalive-no-ack", api.RouteSessionKeepAlive, check.ExpectAny,
			api.KeepAliveRequest{Cell: cellName, Session: s.Session, Secret: s.Secret, WaitMS: 1000})
		var r api.SessionResponse
		if status/100 == 2 && json.Unmarshal(b, &r) == nil {
			n := 0
			for _, ev := range append(r.Events, r.ProxyEvents...) {
				if ev.Type == api.EventInvalidate {
					n++
				}
			}
			x.mu.Lock()
			x.invalidations = max(x.invalidations, n)
			x.mu.Unlock()
		}
		if status == http.StatusNotFound || api.CodeOf(clusterErr(status, b)) == api.CodeSessionExpired {
			return n + 1, fmt.Sprintf("the session ended: %d %s", status, b) // the cell (or proxy) gave up on it
		}
		sleepCtx(ctx, time.Until(next))
	}
	return n, "the phase ended"
}

// keepAlivePace is the least time between two of mallory's KeepAlives
// on one session.
const keepAlivePace = 250 * time.Millisecond

// clusterErr decodes an error reply's api.Error (nil if none).
func clusterErr(status int, body []byte) error {
	if status/100 == 2 {
		return nil
	}
	var er api.ErrorResponse
	if json.Unmarshal(body, &er) != nil || er.Error == nil {
		return nil
	}
	return er.Error
}
