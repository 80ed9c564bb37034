package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// testBadInput sends bad requests over HTTP and checks each gets its error
// code and HTTP status, and that afterwards every node under /demo is
// exactly as before: same paths, versions, indices and values.
func testBadInput(t *testing.T, c *cluster.Cluster, cl *cluster.Client) {
	// Fixtures: a node at version 2, a parent with a child, a live
	// session's ephemeral node, and a session that has expired.
	mustDo(t, cl, api.RoutePut, api.PutRequest{Path: "/demo/bad/val", Value: []byte("v1"), MakeParents: true}, nil)
	mustDo(t, cl, api.RoutePut, api.PutRequest{Path: "/demo/bad/val", Value: []byte("v2")}, nil)
	mustDo(t, cl, api.RoutePut, api.PutRequest{Path: "/demo/bad/parent/child", Value: []byte("c"), MakeParents: true}, nil)
	live := openSession(t, cl, "demo", 3*time.Second)
	live.keepAlive(time.Second)
	defer func() {
		if err := live.close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	mustDo(t, cl, api.RouteCreate, api.CreateRequest{WriteHeader: live.header(), Path: "/demo/bad/eph", Ephemeral: true}, nil)
	expired := openSession(t, cl, "demo", time.Second)
	waitExpired(t, cl, expired)

	before, err := walk(cl, "/demo")
	must(t, err)
	if _, ok := before["/demo/bad/val"]; !ok || before["/demo/bad/val"].Version != 2 {
		t.Fatalf("fixture /demo/bad/val: %+v", before["/demo/bad/val"])
	}

	v := func(n uint64) *uint64 { return &n }
	big := bytes.Repeat([]byte("x"), 65<<10)
	deep := "/demo" + strings.Repeat("/d", api.MaxPathDepth)
	manyWatches := make([]api.WatchSpec, api.MaxWatchesPerCall+1)
	for i := range manyWatches {
		manyWatches[i] = api.WatchSpec{Path: "/demo/bad/val", Kind: api.WatchData}
	}
	const neverSession = 1 << 39 // an index the cell will not reach
	cases := []struct {
		name    string
		method  string // POST unless set
		route   string
		body    any // JSON-encoded unless []byte
		code    api.Code
		status  int      // HTTP status when the body is not an API error
		apiCode api.Code // the error code a non-API-status case must carry
	}{
		{name: "create 65 KiB value", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo/bad/big", Value: big}, code: api.CodeValueTooLarge},
		{name: "put 65 KiB value", route: api.RoutePut, body: api.PutRequest{Path: "/demo/bad/val", Value: big}, code: api.CodeValueTooLarge},
		{name: "relative path", route: api.RouteCreate, body: api.CreateRequest{Path: "a/b"}, code: api.CodeInvalidPath},
		{name: "empty segment", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo//b"}, code: api.CodeInvalidPath},
		{name: "dot-dot segment", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo/../b"}, code: api.CodeInvalidPath},
		{name: "dot segment", route: api.RoutePut, body: api.PutRequest{Path: "/demo/./bad"}, code: api.CodeInvalidPath},
		{name: "root", route: api.RouteCreate, body: api.CreateRequest{Path: "/"}, code: api.CodeInvalidPath},
		{name: "empty path", route: api.RouteCreate, body: api.CreateRequest{Path: ""}, code: api.CodeInvalidPath},
		{name: "4 KiB path", route: api.RoutePut, body: api.PutRequest{Path: "/demo/" + strings.Repeat("p", 4<<10)}, code: api.CodeInvalidPath},
		{name: "trailing slash", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo/bad/"}, code: api.CodeInvalidPath},
		{name: "control character", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo/bad/a\x01b"}, code: api.CodeInvalidPath},
		{name: "too deep", route: api.RouteCreate, body: api.CreateRequest{Path: deep, MakeParents: true}, code: api.CodeInvalidPath},
		{name: "create prefix root", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo"}, code: api.CodeInvalidPath},
		{name: "delete prefix root", route: api.RouteDelete, body: api.DeleteRequest{Path: "/demo"}, code: api.CodeInvalidPath},
		{name: "get with a bad path", route: api.RouteGet, body: api.ReadRequest{Path: "/demo//bad"}, code: api.CodeInvalidPath},
		{name: "ephemeral, unknown session", route: api.RouteCreate, body: api.CreateRequest{WriteHeader: api.WriteHeader{Session: neverSession}, Path: "/demo/bad/e", Ephemeral: true}, code: api.CodeNoSession},
		{name: "ephemeral, no session", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo/bad/e", Ephemeral: true}, code: api.CodeNoSession},
		{name: "ephemeral, expired session", route: api.RouteCreate, body: api.CreateRequest{WriteHeader: api.WriteHeader{Session: expired.id, Request: 1}, Path: "/demo/bad/e", Ephemeral: true}, code: api.CodeSessionExpired},
		{name: "put, expired session", route: api.RoutePut, body: api.PutRequest{WriteHeader: api.WriteHeader{Session: expired.id, Request: 2}, Path: "/demo/bad/val", Value: []byte("no")}, code: api.CodeSessionExpired},
		{name: "keepalive, expired session", route: api.RouteSessionKeepAlive, body: api.KeepAliveRequest{Cell: "demo", Session: expired.id}, code: api.CodeSessionExpired},
		{name: "keepalive, unknown session", route: api.RouteSessionKeepAlive, body: api.KeepAliveRequest{Cell: "demo", Session: neverSession}, code: api.CodeNoSession},
		{name: "keepalive, no session", route: api.RouteSessionKeepAlive, body: api.KeepAliveRequest{Cell: "demo"}, code: api.CodeNoSession},
		{name: "keepalive batch, ages and sessions differ", route: api.RouteKeepAliveBatch, body: api.KeepAliveBatchRequest{Cell: "demo", Sessions: []uint64{live.id}}, code: api.CodeBadRequest},
		{name: "keepalive batch, negative age", route: api.RouteKeepAliveBatch, body: api.KeepAliveBatchRequest{Cell: "demo", Sessions: []uint64{live.id}, AgeMS: []int64{-1}}, code: api.CodeBadRequest},
		{name: "keepalive batch, ack of a session it does not renew", route: api.RouteKeepAliveBatch, body: api.KeepAliveBatchRequest{Cell: "demo", Sessions: []uint64{live.id}, AgeMS: []int64{0}, Acks: []api.BatchAck{{Session: expired.id}}}, code: api.CodeBadRequest},
		{name: "keepalive batch, unknown cell", route: api.RouteKeepAliveBatch, body: api.KeepAliveBatchRequest{Cell: "nope", Sessions: []uint64{live.id}, AgeMS: []int64{0}}, code: api.CodeWrongCell},
		{name: "register proxy, bad name", route: api.RouteAdminProxyRegister, body: api.ProxyInfo{Name: "Bad Name", APIAddr: "127.0.0.1:1"}, code: api.CodeBadRequest},
		{name: "watch without session", route: api.RouteGet, body: api.ReadRequest{Path: "/demo/bad/val", Watch: api.WatchData}, code: api.CodeNoSession},
		{name: "CAS stale version", route: api.RoutePut, body: api.PutRequest{Path: "/demo/bad/val", Value: []byte("no"), Version: v(1)}, code: api.CodeVersionMismatch},
		{name: "CAS future version", route: api.RoutePut, body: api.PutRequest{Path: "/demo/bad/val", Value: []byte("no"), Version: v(3)}, code: api.CodeVersionMismatch},
		{name: "delete stale version", route: api.RouteDelete, body: api.DeleteRequest{Path: "/demo/bad/val", Version: v(1)}, code: api.CodeVersionMismatch},
		{name: "put version 0 on existing", route: api.RoutePut, body: api.PutRequest{Path: "/demo/bad/val", Value: []byte("no"), Version: v(0)}, code: api.CodeNodeExists},
		{name: "create existing", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo/bad/val", Value: []byte("no")}, code: api.CodeNodeExists},
		{name: "delete non-empty", route: api.RouteDelete, body: api.DeleteRequest{Path: "/demo/bad/parent"}, code: api.CodeNotEmpty},
		{name: "delete missing", route: api.RouteDelete, body: api.DeleteRequest{Path: "/demo/bad/missing"}, code: api.CodeNoNode},
		{name: "create without parent", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo/bad/nope/child"}, code: api.CodeNoNode},
		{name: "CAS on missing", route: api.RoutePut, body: api.PutRequest{Path: "/demo/bad/missing", Value: []byte("no"), Version: v(3)}, code: api.CodeNoNode},
		{name: "get missing", route: api.RouteGet, body: api.ReadRequest{Path: "/demo/bad/missing"}, code: api.CodeNoNode},
		{name: "child of ephemeral", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo/bad/eph/kid"}, code: api.CodeBadRequest},
		{name: "persistent lock node", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo/bad/l-", Sequential: true, Lock: api.LockExclusive}, code: api.CodeBadRequest},
		{name: "unknown lock mode", route: api.RouteCreate, body: api.CreateRequest{Path: "/demo/bad/l-", Ephemeral: true, Sequential: true, Lock: "weird"}, code: api.CodeBadRequest},
		{name: "unknown watch kind", route: api.RouteGet, body: api.ReadRequest{Path: "/demo/bad/val", Session: live.id, Watch: "bogus"}, code: api.CodeBadRequest},
		{name: "too many watches", route: api.RouteWatch, body: api.WatchRequest{Cell: "demo", Session: live.id, Watches: manyWatches}, code: api.CodeBadRequest},
		{name: "malformed JSON create", route: api.RouteCreate, body: []byte(`{"path": "/demo/bad/m",`), code: api.CodeBadRequest},
		{name: "malformed JSON put", route: api.RoutePut, body: []byte(`not json`), code: api.CodeBadRequest},
		{name: "malformed JSON delete", route: api.RouteDelete, body: []byte(`{"path": 7}`), code: api.CodeBadRequest},
		{name: "malformed JSON open", route: api.RouteSessionOpen, body: []byte(`[]`), code: api.CodeBadRequest},
		{name: "empty body", route: api.RouteCreate, body: []byte{}, code: api.CodeBadRequest},
		{name: "open without cell", route: api.RouteSessionOpen, body: api.OpenSessionRequest{}, code: api.CodeBadRequest},
		{name: "open unknown cell", route: api.RouteSessionOpen, body: api.OpenSessionRequest{Cell: "nope"}, code: api.CodeWrongCell},
		{name: "create under /nope", route: api.RouteCreate, body: api.CreateRequest{Path: "/nope/x"}, code: api.CodeWrongCell},
		{name: "put under /nope", route: api.RoutePut, body: api.PutRequest{Path: "/nope/x", Value: []byte("no"), MakeParents: true}, code: api.CodeWrongCell},
		{name: "watch in another cell", route: api.RouteWatch, body: api.WatchRequest{Cell: "demo", Session: live.id, Watches: []api.WatchSpec{{Path: "/payments/x", Kind: api.WatchData}}}, code: api.CodeWrongCell},
		{name: "GET on create", method: http.MethodGet, route: api.RouteCreate, code: api.CodeBadRequest},
		{name: "GET on put", method: http.MethodGet, route: api.RoutePut, code: api.CodeBadRequest},
		{name: "GET on keepalive", method: http.MethodGet, route: api.RouteSessionKeepAlive, code: api.CodeBadRequest},
		{name: "unknown route", route: "/v1/node/frobnicate", body: api.CreateRequest{Path: "/demo/bad/f"}, status: http.StatusNotFound, apiCode: api.CodeBadRequest},
		// fasthttp refuses a body over MaxRequestBody before any handler
		// runs; its error handler still answers with an API error body.
		{name: "body over the request limit", route: api.RoutePut, body: api.PutRequest{Path: "/demo/bad/huge", Value: bytes.Repeat([]byte("h"), api.MaxRequestBody)}, status: http.StatusRequestEntityTooLarge, apiCode: api.CodeValueTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			var body []byte
			switch b := tc.body.(type) {
			case nil:
			case []byte:
				body = b
			default:
				var err error
				if body, err = json.Marshal(b); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			status, resp, err := cl.Raw(ctx, method, tc.route, body)
			if err != nil {
				t.Fatalf("%s %s: %v", method, tc.route, err)
			}
			if tc.code == "" {
				if status != tc.status {
					t.Fatalf("HTTP %d %s, want HTTP %d", status, resp, tc.status)
				}
				if err := cluster.DecodeError(status, resp); !isCode(err, tc.apiCode) {
					t.Fatalf("HTTP %d body %q, want an API error %s", status, resp, tc.apiCode)
				}
				return
			}
			err = cluster.DecodeError(status, resp)
			if status/100 == 2 || !isCode(err, tc.code) {
				t.Fatalf("HTTP %d %s, want %s", status, resp, tc.code)
			}
			if want := tc.code.HTTPStatus(); status != want {
				t.Errorf("%s came with HTTP %d, want %d", tc.code, status, want)
			}
		})
	}

	after, err := walk(cl, "/demo")
	must(t, err)
	if d := diff(before, after); d != "" {
		t.Errorf("bad input changed the namespace under /demo: %s", d)
	}
	if string(after["/demo/bad/val"].Value) != "v2" {
		t.Errorf("/demo/bad/val is %q, want v2", after["/demo/bad/val"].Value)
	}
	t.Logf("%d bad requests, %d nodes under /demo unchanged", len(cases), len(after))
}

// waitExpired lets s's lease run out (no keepalives) and waits, bounded,
// until the cell reports it ended. The probe, a watch call with no
// watches, has no effect on a live session.
func waitExpired(t *testing.T, cl *cluster.Client, s *session) {
	t.Helper()
	deadline := time.Now().Add(s.lease + 20*time.Second)
	for i := 0; i < 10_000 && time.Now().Before(deadline); i++ {
		err := do(cl, api.RouteWatch, api.WatchRequest{Cell: s.cell, Session: s.id, Secret: s.secret}, nil)
		if isCode(err, api.CodeSessionExpired) {
			return
		}
		if err != nil {
			t.Fatalf("probe session %d: %v", s.id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("session %d (lease %v) did not expire", s.id, s.lease)
}
