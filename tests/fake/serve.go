package fake

// The HTTP side and the faults: each request is recorded, passed to the
// test's hook if any (to drop, delay or answer it: unavailable, moved,
// a lost reply), then decoded and routed as a lockd routes it.

import (
	"encoding/json"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/health"
)

// SetHook installs h (nil removes it).
func (c *Cell) SetHook(h Hook) {
	c.mu.Lock()
	c.hook = h
	c.mu.Unlock()
}

// Requests lists the requests received on route ("" for all), in order.
func (c *Cell) Requests(route string) []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Request
	for _, r := range c.reqs {
		if route == "" || r.Route == route {
			out = append(out, r)
		}
	}
	return out
}

// Handle runs the fake's own handling of a request as replica rep, as if
// it had arrived (without recording it or running the hook).
func (c *Cell) Handle(rep int, route string, body []byte) (int, any) {
	return c.handle(rep, route, body)
}

// Fail is an error reply for a Hook: the code's HTTP status and an *api.Error.
func Fail(code api.Code, format string, args ...any) (int, any) {
	return code.HTTPStatus(), api.Errorf(code, format, args...)
}

func (c *Cell) serve(rep int, ctx *fasthttp.RequestCtx) {
	route := string(ctx.Path())
	body := append([]byte(nil), ctx.PostBody()...)
	wire := isWire(route, ctx.Request.Header.ContentType())
	var werr *api.Error
	if wire && !c.noWire {
		var j []byte
		if j, werr = fromWire(route, body); werr == nil {
			body = j
		}
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, Request{Replica: rep, Route: route, Body: body, Auth: string(ctx.Request.Header.Peek("Authorization")),
		DirIndex: string(ctx.Request.Header.Peek(api.HeaderDirectoryIndex)), Wire: wire})
	hook := c.hook
	c.mu.Unlock()

	next := func() (int, any) { return c.handle(rep, route, body) }
	var status int
	var resp any
	switch {
	case werr != nil:
		status, resp = werr.Code.HTTPStatus(), werr
	case hook != nil:
		status, resp = hook(rep, route, body, next)
	default:
		status, resp = next()
	}
	if wire && !c.noWire && status == fasthttp.StatusOK {
		if b, err := toWire(route, resp); err == nil {
			ctx.SetStatusCode(status)
			ctx.SetContentType(api.ContentTypeWire)
			ctx.SetBody(b)
			return
		}
	}
	if e, ok := resp.(*api.Error); ok {
		resp = api.ErrorResponse{Error: e}
		if status == 0 {
			status = e.Code.HTTPStatus()
		}
	}
	b, _ := json.Marshal(resp)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// onLeader answers a request for the leader as a lockd's handler does:
// decode body as the request type of serve, refuse what check refuses
// (what a lockd refuses before it finds the cell: checks.go; nil for
// none), then refuse on a replica that does not lead, then serve.
func onLeader[T any](c *Cell, rep int, body []byte, check func(T) error, serve func(T) (int, any)) (int, any) {
	var req T
	if err := json.Unmarshal(body, &req); err != nil {
		return Fail(api.CodeBadRequest, "malformed JSON body: %v", err)
	}
	if check != nil {
		if err := check(req); err != nil {
			return refuse(api.AsError(err))
		}
	}
	if rep != c.leader {
		return c.notLeaderLocked()
	}
	return serve(req)
}

// handle answers a request on replica rep: the directory and status on
// any replica, everything else on the leader only.
func (c *Cell) handle(rep int, route string, body []byte) (int, any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch route {
	case api.RouteHealth:
		return 200, "ok"
	case api.RouteDirectory:
		return 200, c.directoryLocked()
	case api.RouteStatus:
		return 200, c.statusLocked(rep)
	case api.RouteStatusHealth:
		return 200, c.healthLocked(rep)
	case api.RouteSessionOpen:
		return onLeader(c, rep, body, c.checkOpen, c.openSessionLocked)
	case api.RouteSessionKeepAlive:
		return onLeader(c, rep, body, c.checkKeepAlive, func(req api.KeepAliveRequest) (int, any) { return c.keepAliveLocked(rep, req) })
	case api.RouteSessionClose:
		return onLeader(c, rep, body, c.checkClose, c.closeSessionLocked)
	case api.RouteCreate:
		return onLeader(c, rep, body, nil, c.createLocked)
	case api.RoutePut:
		return onLeader(c, rep, body, nil, c.putLocked)
	case api.RouteDelete:
		return onLeader(c, rep, body, nil, c.deleteLocked)
	case api.RouteTxn:
		return onLeader(c, rep, body, nil, c.txnLocked) // txn.go
	case api.RouteGet:
		return onLeader(c, rep, body, checkGet, c.getLocked)
	case api.RouteChildren:
		return onLeader(c, rep, body, checkChildren, c.childrenLocked)
	case api.RouteWatch:
		return onLeader(c, rep, body, c.checkWatch, c.watchLocked)
	case api.RouteLockState:
		return onLeader(c, rep, body, nil, c.lockStateLocked)
	case api.RouteLockQueue:
		return onLeader(c, rep, body, nil, c.lockQueueLocked)
	case api.RouteLockCheck:
		return onLeader(c, rep, body, checkLockCheck, c.lockCheckLocked)
	}
	return Fail(api.CodeBadRequest, "no route %s", route)
}

func (c *Cell) directoryLocked() api.DirectoryResponse {
	d := api.DirectoryResponse{Index: 1, Cells: []api.CellInfo{{Name: c.name, ShardID: 1, Prefixes: c.prefixes, Endpoints: c.endpoints, Timing: c.timing}}}
	for _, p := range c.prefixes {
		d.Prefixes = append(d.Prefixes, api.PrefixInfo{Prefix: p, Cell: c.name, Epoch: prefixEpoch})
	}
	return d
}

// healthLocked assesses the fake's cell as a lockd would (server/health),
// from every replica's status: each replica is a lockd, in its own zone.
func (c *Cell) healthLocked(rep int) api.ClusterHealth {
	d := c.directoryLocked()
	in := health.Input{Now: time.Now(), Self: c.replicas[rep].addr, Dir: d, LastAnswered: map[uint64]time.Time{}}
	for i, r := range c.replicas {
		id := uint64(i + 1)
		st := c.statusLocked(i)
		d.Lockds = append(d.Lockds, api.LockdInfo{ID: id, APIAddr: r.addr})
		d.Cells[0].Replicas = append(d.Cells[0].Replicas, api.ReplicaInfo{ReplicaID: id, Lockd: id, APIAddr: r.addr})
		in.Lockds = append(in.Lockds, api.LockdStatus{ID: id, APIAddr: r.addr, Status: &st})
		in.LastAnswered[id] = in.Now
	}
	in.Dir = d
	return health.Assess(in)
}

func (c *Cell) statusLocked(rep int) api.StatusResponse {
	role := "follower"
	if rep == c.leader {
		role = "leader"
	}
	_, term := c.st.Leader()
	st := api.ReplicaStatus{Cell: c.name, ShardID: 1, ReplicaID: uint64(rep + 1), Role: role, Term: term, AppliedIndex: c.st.Index(), Epoch: c.st.Epoch(),
		Sessions: c.st.NumSessions(), Nodes: c.st.NumNodes(), TokenHeadroom: c.st.TokenHeadroom()}
	if c.leader >= 0 {
		st.LeaderID, st.LeaderAPI = uint64(c.leader+1), c.replicas[c.leader].addr
	}
	return api.StatusResponse{ReplicaID: uint64(rep + 1), APIAddr: c.replicas[rep].addr, Cells: []api.ReplicaStatus{st}}
}
