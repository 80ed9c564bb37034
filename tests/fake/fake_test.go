package fake

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestAnswersAsTheStateMachine is a transcript against the fake: its
// answers are the real state machine's (names from 0, writes answered
// without the value, secrets, dedupe, expiry by an entry), and only
// leadership is its own.
func TestAnswersAsTheStateMachine(t *testing.T) {
	c, err := New(Options{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, v := c.Handle(0, api.RouteSessionOpen, mustJSON(t, api.OpenSessionRequest{Cell: c.Name(), LeaseMS: 3000}))
	s := v.(api.SessionResponse)
	own := api.WriteHeader{Session: s.Session, Secret: s.Secret, Request: 1}
	lock := api.CreateRequest{WriteHeader: own, Path: "/demo/l/w-", Ephemeral: true, Sequential: true, Lock: api.LockExclusive, MakeParents: true}
	steps := []struct {
		name  string
		rep   int
		route string
		req   any
		code  api.Code // "" for success
		check func(v any) bool
	}{
		{"a follower refuses", 1, api.RoutePut, api.PutRequest{Path: "/demo/x"}, api.CodeNotLeader, nil},
		{"a put answers without the value", 0, api.RoutePut, api.PutRequest{Path: "/demo/x", Value: []byte("v")}, "",
			func(v any) bool { r := v.(api.WriteResponse); return r.Node.Version == 1 && r.Node.Value == nil }},
		{"a sequential name starts at 0", 0, api.RouteCreate, lock, "",
			func(v any) bool {
				r := v.(api.CreateResponse)
				return r.Node.Path == "/demo/l/w-0000000000" && r.Token != 0
			}},
		{"a retry is answered from the dedupe window", 0, api.RouteCreate, lock, "",
			func(v any) bool { return v.(api.CreateResponse).Node.Path == "/demo/l/w-0000000000" }},
		{"a wrong secret is refused", 0, api.RoutePut, api.PutRequest{WriteHeader: api.WriteHeader{Session: s.Session, Secret: "x", Request: 2}, Path: "/demo/x"},
			api.CodeUnauthorized, nil},
		{"a prefix root is the cell's", 0, api.RouteDelete, api.DeleteRequest{Path: "/demo"}, api.CodeInvalidPath, nil},
		{"another prefix is another cell's", 0, api.RouteGet, api.ReadRequest{Path: "/other/x"}, api.CodeWrongCell, nil},
		{"the holder's own node is watched", 0, api.RouteLockState, api.LockStateRequest{Path: "/demo/l/w-0000000000"}, "",
			func(v any) bool {
				return v.(api.LockStateResponse).Held && c.Armed(s.Session, WatchKey{"/demo/l/w-0000000000", api.WatchData})
			}},
	}
	for _, st := range steps {
		status, v := c.Handle(st.rep, st.route, mustJSON(t, st.req))
		if e, ok := v.(*api.Error); ok || st.code != "" {
			if !ok || e.Code != st.code || status != st.code.HTTPStatus() {
				t.Fatalf("%s: %d %+v, want %s", st.name, status, v, st.code)
			}
			continue
		}
		if status != 200 || !st.check(v) {
			t.Fatalf("%s: %d %+v", st.name, status, v)
		}
	}

	c.Expire(s.Session)
	if _, ok := c.Node("/demo/l/w-0000000000"); ok {
		t.Fatal("the expired session's lock node is still there")
	}
	_, v = c.Handle(0, api.RouteSessionKeepAlive, mustJSON(t, api.KeepAliveRequest{Cell: c.Name(), Session: s.Session, Secret: s.Secret}))
	if e, ok := v.(*api.Error); !ok || e.Code != api.CodeSessionExpired {
		t.Fatalf("keepalive after expiry: %+v", v)
	}
	c.Failover(1)
	if _, v = c.Handle(1, api.RouteStatus, nil); v.(api.StatusResponse).Cells[0].Epoch != 2 {
		t.Fatalf("status after a fail-over: %+v", v)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRefusesAsALockd: what a lockd refuses before it finds the cell
// (server/httpapi: readyCell for the cell a request names, the nonce,
// watch kinds per route, a negative cache window, watches per call, a
// session route naming none), the fake refuses with the same code and
// message, before its leader check, and proposing nothing.
func TestRefusesAsALockd(t *testing.T) {
	c, err := New(Options{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, v := c.Handle(0, api.RouteSessionOpen, mustJSON(t, api.OpenSessionRequest{Cell: c.Name()}))
	s := v.(api.SessionResponse)
	watches := func(n int, kind api.WatchKind) []api.WatchSpec {
		ws := make([]api.WatchSpec, n)
		for i := range ws {
			ws[i] = api.WatchSpec{Path: "/demo/w", Kind: kind}
		}
		return ws
	}
	cases := []struct {
		name  string
		rep   int
		route string
		req   any
		code  api.Code // "" for success
		msg   string
	}{
		// 1. The cell a session or watch request names.
		{"open naming no cell", 0, api.RouteSessionOpen, api.OpenSessionRequest{}, api.CodeBadRequest, "no cell named"},
		{"open naming another cell", 0, api.RouteSessionOpen, api.OpenSessionRequest{Cell: "other"}, api.CodeWrongCell, "no cell other"},
		{"open naming no cell, at a follower", 1, api.RouteSessionOpen, api.OpenSessionRequest{}, api.CodeBadRequest, "no cell named"},
		{"open naming the cell, at a follower", 1, api.RouteSessionOpen, api.OpenSessionRequest{Cell: c.Name()}, api.CodeNotLeader, "not the leader"},
		{"keepalive naming no cell", 0, api.RouteSessionKeepAlive, api.KeepAliveRequest{Session: s.Session, Secret: s.Secret}, api.CodeBadRequest, "no cell named"},
		{"keepalive naming another cell", 0, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: "other", Session: s.Session, Secret: s.Secret}, api.CodeWrongCell, "no cell other"},
		{"keepalive naming no session", 0, api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: c.Name()}, api.CodeNoSession, "keepalive names no session"},
		{"close naming no cell", 0, api.RouteSessionClose, api.CloseSessionRequest{Session: s.Session, Secret: s.Secret}, api.CodeBadRequest, "no cell named"},
		{"close naming another cell", 0, api.RouteSessionClose, api.CloseSessionRequest{Cell: "other", Session: s.Session, Secret: s.Secret}, api.CodeWrongCell, "no cell other"},
		{"close naming no session", 0, api.RouteSessionClose, api.CloseSessionRequest{Cell: c.Name()}, api.CodeNoSession, "close names no session"},
		{"watch naming no cell, no watches", 0, api.RouteWatch, api.WatchRequest{Session: s.Session, Secret: s.Secret}, api.CodeBadRequest, "no cell named"},
		{"watch naming another cell", 0, api.RouteWatch, api.WatchRequest{Cell: "other", Session: s.Session, Secret: s.Secret, Watches: watches(1, api.WatchData)},
			api.CodeWrongCell, "/demo/w is not served by cell other"},
		{"watch of a prefix the cell does not serve", 0, api.RouteWatch,
			api.WatchRequest{Cell: c.Name(), Session: s.Session, Secret: s.Secret, Watches: []api.WatchSpec{{Path: "/other/w", Kind: api.WatchData}}},
			api.CodeWrongCell, "/other/w is not served by cell demo-cell"},
		// 2. Watch kinds per route.
		{"get with an unknown watch kind", 0, api.RouteGet, api.ReadRequest{Path: "/demo", Session: s.Session, Secret: s.Secret, Watch: "bogus"},
			api.CodeBadRequest, `watch kind "bogus" is not one of [data children] here`},
		{"get with a children watch", 0, api.RouteGet, api.ReadRequest{Path: "/demo", Session: s.Session, Secret: s.Secret, Watch: api.WatchChildren}, "", ""},
		{"children with a data watch", 0, api.RouteChildren, api.ReadRequest{Path: "/demo", Session: s.Session, Secret: s.Secret, Watch: api.WatchData},
			api.CodeBadRequest, `watch kind "data" is not one of [children] here`},
		{"children with a data watch, at a follower", 1, api.RouteChildren, api.ReadRequest{Path: "/demo", Watch: api.WatchData},
			api.CodeBadRequest, `watch kind "data" is not one of [children] here`},
		{"watch of an unknown kind", 0, api.RouteWatch, api.WatchRequest{Cell: c.Name(), Session: s.Session, Secret: s.Secret, Watches: watches(1, "bogus")},
			api.CodeBadRequest, `unknown watch kind "bogus"`},
		// 3. The named limits.
		{"a nonce at the limit", 0, api.RouteSessionOpen, api.OpenSessionRequest{Cell: c.Name(), Nonce: strings.Repeat("n", api.MaxNonceLen)}, "", ""},
		{"a nonce past the limit", 0, api.RouteSessionOpen, api.OpenSessionRequest{Cell: c.Name(), Nonce: strings.Repeat("n", api.MaxNonceLen+1)},
			api.CodeBadRequest, "nonce is 65 bytes, limit 64"},
		{"a nonce past the limit naming no cell", 0, api.RouteSessionOpen, api.OpenSessionRequest{Nonce: strings.Repeat("n", api.MaxNonceLen+1)},
			api.CodeBadRequest, "nonce is 65 bytes, limit 64"},
		{"a negative cache window", 0, api.RouteGet, api.ReadRequest{Path: "/demo", Session: s.Session, Secret: s.Secret, Cache: true, CacheWindowMS: -1},
			api.CodeBadRequest, "cache_window_ms -1 is negative"},
		{"watches at the limit per call", 0, api.RouteWatch, api.WatchRequest{Cell: c.Name(), Session: s.Session, Secret: s.Secret, Watches: watches(api.MaxWatchesPerCall, api.WatchData)}, "", ""},
		{"watches past the limit per call", 0, api.RouteWatch, api.WatchRequest{Cell: c.Name(), Session: s.Session, Secret: s.Secret, Watches: watches(api.MaxWatchesPerCall+1, api.WatchData)},
			api.CodeBadRequest, "1025 watches, limit 1024 per call"},
		{"a lock check of token 0, at a follower", 1, api.RouteLockCheck, api.LockCheckRequest{Path: "/demo/l"},
			api.CodeBadRequest, "lock check needs the token to check (a grant's fencing token, never 0)"},
		{"a malformed body", 0, api.RouteGet, []byte("{"), api.CodeBadRequest, "malformed JSON body: unexpected end of JSON input"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, ok := tc.req.([]byte)
			if !ok {
				body = mustJSON(t, tc.req)
			}
			c.mu.Lock()
			before := c.st.Index()
			c.mu.Unlock()
			status, v := c.Handle(tc.rep, tc.route, body)
			if tc.code == "" {
				if status != 200 {
					t.Fatalf("%d %+v, want 200", status, v)
				}
				return
			}
			e, ok := v.(*api.Error)
			if !ok || e.Code != tc.code || e.Message != tc.msg || status != tc.code.HTTPStatus() {
				t.Fatalf("%d %+v, want %d %s %q", status, v, tc.code.HTTPStatus(), tc.code, tc.msg)
			}
			c.mu.Lock()
			after := c.st.Index()
			c.mu.Unlock()
			if after != before {
				t.Fatalf("a refusal moved the index from %d to %d: the lockd proposes nothing", before, after)
			}
		})
	}
}

// TestOpenTellsTheTiming: a session open's reply carries the cell's
// keepalive and grace and its lease is the cell's default, as a lockd's
// cell fills them from its timing (none: omitted, the lockds' defaults);
// the directory lists the timing; a timing the cell could not run with
// is refused.
func TestOpenTellsTheTiming(t *testing.T) {
	timing := &api.CellTiming{LeaseMS: 30_000, KeepAliveMS: 5_000, GraceMS: 90_000}
	cases := []struct {
		name   string
		timing *api.CellTiming
		want   api.SessionResponse // the fields compared: LeaseMS, KeepAliveMS, GraceMS
	}{
		{"the lockds' defaults", nil, api.SessionResponse{LeaseMS: api.DefaultLease.Milliseconds()}},
		{"the cell's own timing", timing, api.SessionResponse{LeaseMS: 30_000, KeepAliveMS: 5_000, GraceMS: 90_000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Options{Timing: tc.timing})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, v := c.Handle(0, api.RouteSessionOpen, mustJSON(t, api.OpenSessionRequest{Cell: c.Name()}))
			got := v.(api.SessionResponse)
			if got.LeaseMS != tc.want.LeaseMS || got.KeepAliveMS != tc.want.KeepAliveMS || got.GraceMS != tc.want.GraceMS {
				t.Fatalf("open: lease %d keepalive %d grace %d, want %d %d %d", got.LeaseMS, got.KeepAliveMS, got.GraceMS,
					tc.want.LeaseMS, tc.want.KeepAliveMS, tc.want.GraceMS)
			}
			_, v = c.Handle(0, api.RouteDirectory, nil)
			if listed := v.(api.DirectoryResponse).Cells[0].Timing; (listed == nil) != (tc.timing == nil) || listed != nil && *listed != *tc.timing {
				t.Fatalf("directory lists timing %+v, want %+v", listed, tc.timing)
			}
		})
	}
	if _, err := New(Options{Timing: &api.CellTiming{LeaseMS: 30_000, KeepAliveMS: 20_000}}); api.CodeOf(err) != api.CodeBadRequest {
		t.Fatalf("a keepalive over a third of the lease: %v", err)
	}
}
