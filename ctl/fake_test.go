package ctl

// A minimal in-process fake of one lockd process serving one cell, for
// lockctl's unit tests only: directory, status and the node routes.

import (
	"encoding/json"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/valyala/fasthttp"
)

type fakeServer struct {
	addr string
	srv  *fasthttp.Server
	done chan struct{}

	mu     sync.Mutex
	index  uint64
	nodes  map[string]*api.Node
	bodies map[string][][]byte // route → request bodies
	auth   []string
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{
		addr:   ln.Addr().String(),
		done:   make(chan struct{}),
		index:  1,
		nodes:  map[string]*api.Node{"/demo": {Path: "/demo", Version: 1, CreateIndex: 1, ModifyIndex: 1}},
		bodies: map[string][][]byte{},
	}
	f.srv = &fasthttp.Server{Handler: f.serve, MaxIdleWorkerDuration: 20 * time.Millisecond, CloseOnShutdown: true}
	go func() {
		defer close(f.done)
		_ = f.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = f.srv.Shutdown()
		<-f.done
	})
	return f
}

func (f *fakeServer) requests(route string) [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[route]
}

func (f *fakeServer) serve(ctx *fasthttp.RequestCtx) {
	route := string(ctx.Path())
	body := append([]byte(nil), ctx.PostBody()...)
	f.mu.Lock()
	f.bodies[route] = append(f.bodies[route], body)
	f.auth = append(f.auth, string(ctx.Request.Header.Peek("Authorization")))
	status, resp := f.handle(route, body)
	f.mu.Unlock()
	if e, ok := resp.(*api.Error); ok {
		status, resp = e.Code.HTTPStatus(), api.ErrorResponse{Error: e}
	}
	b, _ := json.Marshal(resp)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func (f *fakeServer) handle(route string, body []byte) (int, any) {
	switch route {
	case api.RouteDirectory:
		return 200, api.DirectoryResponse{Cells: []api.CellInfo{{Name: "demo", ShardID: 1, Prefixes: []string{"/demo"}, Epoch: 1, Endpoints: []string{f.addr}}}}
	case api.RouteStatus:
		return 200, api.StatusResponse{ReplicaID: 1, APIAddr: f.addr, Cells: []api.ReplicaStatus{{
			Cell: "demo", ShardID: 1, ReplicaID: 1, Role: "leader", LeaderID: 1, LeaderAPI: f.addr, Term: 3, AppliedIndex: f.index, Epoch: 2,
		}}}
	case api.RouteGet, api.RouteChildren:
		var req api.ReadRequest
		_ = json.Unmarshal(body, &req)
		n := f.nodes[req.Path]
		if n == nil {
			return 0, api.Errorf(api.CodeNoNode, "%s does not exist", req.Path)
		}
		if route == api.RouteGet {
			return 200, api.GetResponse{Exists: true, Node: *n, Index: f.index}
		}
		var kids []string
		for p := range f.nodes {
			if api.Parent(p) == req.Path {
				kids = append(kids, api.Base(p))
			}
		}
		sort.Strings(kids)
		return 200, api.ChildrenResponse{Node: *n, Children: kids, Index: f.index}
	case api.RoutePut:
		var req api.PutRequest
		_ = json.Unmarshal(body, &req)
		n := f.nodes[req.Path]
		switch {
		case n != nil && req.Version != nil && *req.Version == 0:
			return 0, api.Errorf(api.CodeNodeExists, "%s exists", req.Path)
		case n != nil && req.Version != nil && *req.Version != n.Version:
			return 0, api.Errorf(api.CodeVersionMismatch, "%s is at version %d", req.Path, n.Version)
		case n == nil && req.Version != nil && *req.Version != 0:
			return 0, api.Errorf(api.CodeNoNode, "%s does not exist", req.Path)
		}
		f.index++
		if n == nil {
			n = &api.Node{Path: req.Path, CreateIndex: f.index}
			f.nodes[req.Path] = n
			if p := f.nodes[api.Parent(req.Path)]; p != nil {
				p.NumChildren++
			}
		}
		n.Value, n.Version, n.ModifyIndex = req.Value, n.Version+1, f.index
		return 200, api.WriteResponse{Node: *n, Index: f.index}
	case api.RouteDelete:
		var req api.DeleteRequest
		_ = json.Unmarshal(body, &req)
		n := f.nodes[req.Path]
		switch {
		case n == nil:
			return 0, api.Errorf(api.CodeNoNode, "%s does not exist", req.Path)
		case req.Version != nil && *req.Version != n.Version:
			return 0, api.Errorf(api.CodeVersionMismatch, "%s is at version %d", req.Path, n.Version)
		}
		f.index++
		delete(f.nodes, req.Path)
		if p := f.nodes[api.Parent(req.Path)]; p != nil {
			p.NumChildren--
		}
		return 200, api.WriteResponse{Node: *n, Index: f.index}
	}
	return 0, api.Errorf(api.CodeBadRequest, "no route %s", route)
}

func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	_ = ln.Close()
	return a
}
