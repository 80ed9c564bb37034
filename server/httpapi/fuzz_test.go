package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/lockservice/lockd/server/dirfsm"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
	"github.com/lockservice/lockd/server/cell"
)

// noCells is a lockd that hosts no cell and reaches no directory: every
// request is decoded and validated, then refused.
type noCells struct{ dir *directory.Directory }

func (h noCells) Cell(string) (*cell.Cell, bool)   { return nil, false }
func (h noCells) Directory() *directory.Directory  { return h.dir }
func (h noCells) RefreshDirectory(context.Context) {}
func (h noCells) ReadDirectory(context.Context) (api.DirectoryResponse, error) {
	return api.DirectoryResponse{}, nil
}
func (h noCells) ProposeDirectory(context.Context, *dirfsm.Command) (dirfsm.Result, error) {
	return dirfsm.Result{}, api.Errorf(api.CodeUnavailable, "no directory here")
}
func (h noCells) ClusterStatus(context.Context) api.ClusterStatus       { return api.ClusterStatus{} }
func (h noCells) ClusterHealth(context.Context, bool) api.ClusterHealth { return api.ClusterHealth{} }
func (h noCells) CallLockd(context.Context, string, string, string, any, any) error {
	return api.Errorf(api.CodeUnavailable, "no lockd")
}
func (h noCells) ChangeMember(context.Context, *cell.Cell, api.MemberRequest) (api.CellInfo, error) {
	return api.CellInfo{}, api.Errorf(api.CodeUnavailable, "no cell here")
}

var fuzzRoutes = []string{
	api.RouteSessionOpen, api.RouteSessionKeepAlive, api.RouteSessionClose, api.RouteKeepAliveBatch,
	api.RouteCreate, api.RoutePut, api.RouteDelete, api.RouteGet, api.RouteChildren, api.RouteLockState, api.RouteTxn, api.RouteRange, api.RouteRanges, api.RouteChanges,
	api.RouteWatch, api.RouteAdminCellCreate, api.RouteAdminPrefixAssign, api.RouteAdminRegister,
	api.RouteAdminMigrate, api.RouteAdminMember, api.RouteAdminRestore, api.RouteAdminTransfer,
	api.RouteAdminPrefixOp, api.RouteAdminProxyRegister, "/v1/nope",
}

// FuzzRequestDecoding sends arbitrary bodies to every route: the server
// never panics, and every refusal is an api.ErrorResponse whose code is a
// known one (never internal) with the HTTP status that code maps to.
func FuzzRequestDecoding(f *testing.F) {
	for i, body := range []string{
		`{"cell":"demo","lease_ms":12000,"nonce":"n1"}`,
		`{"cell":"demo","session":7,"wait_ms":0,"ack_seq":3,"ack_epoch":2,"proxy":"p/1","proxy_ack":4}`,
		`{"cell":"demo","proxy":"p","sessions":[1,2],"age_ms":[0,5],"acks":[{"session":1,"ack_seq":2}]}`,
		`{"path":"/demo/a/b","value":"aGk=","ephemeral":true,"sequential":true,"lock":"exclusive","make_parents":true,"session":1,"request":1}`,
		`{"path":"/demo/a","value":"","version":0}`,
		`{"path":"/demo/a","session":9,"watch":"data","cache":true}`,
		`{"cell":"demo","session":1,"watches":[{"path":"/demo/a","kind":"children","since":5}]}`,
		`{"path":"//x/../","value":null}`, `[]`, `null`, `{`, `{"path":7}`, "",
	} {
		f.Add(uint8(i), []byte(body))
	}
	dir, err := directory.New(api.DirectoryResponse{})
	if err != nil {
		f.Fatal(err)
	}
	s := New(noCells{dir: dir}, func() api.StatusResponse { return api.StatusResponse{} }, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	// noCells reads nothing, so no gap between its reads: with the
	// production gap every request naming a cell waits up to 100 ms, and
	// minimizing such an input (100 executions) outlasted -fuzztime: the
	// engine then failed "context deadline exceeded" (CI on fba38d4).
	s.dir.gap = 0
	f.Fuzz(func(t *testing.T, r uint8, body []byte) {
		route := fuzzRoutes[int(r)%len(fuzzRoutes)]
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI(route)
		ctx.Request.Header.Set(api.HeaderCell, "demo")
		ctx.Request.Header.Set(api.HeaderWaitLeaderMS, "0")
		ctx.Request.SetBody(body)
		s.Handler(&ctx)
		status := ctx.Response.StatusCode()
		if status == fasthttp.StatusOK {
			if !json.Valid(ctx.Response.Body()) {
				t.Fatalf("%s %q: 200 with a body that is not JSON: %q", route, body, ctx.Response.Body())
			}
			return
		}
		var er api.ErrorResponse
		if err := json.Unmarshal(ctx.Response.Body(), &er); err != nil || er.Error == nil || er.Error.Code == "" {
			t.Fatalf("%s %q: status %d with body %q: not an error response", route, body, status, ctx.Response.Body())
		}
		if er.Error.Code == api.CodeInternal {
			t.Fatalf("%s %q: internal error %v", route, body, er.Error)
		}
		want := er.Error.Code.HTTPStatus()
		if _, known := postRoutes[route]; !known {
			want = fasthttp.StatusNotFound // no such route: 404, code bad_request
		}
		if want != status {
			t.Fatalf("%s %q: code %s with status %d, want %d", route, body, er.Error.Code, status, want)
		}
	})
}

// TestRefusalsAreLogged: a refused request leaves one structured line
// with its route, code and client; routine answers stay at debug.
func TestRefusalsAreLogged(t *testing.T) {
	dir, err := directory.New(api.DirectoryResponse{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s := New(noCells{dir: dir}, func() api.StatusResponse { return api.StatusResponse{} }, prometheus.NewRegistry(), log)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI(api.RouteCreate)
	ctx.Request.SetBody([]byte(`{"path":"//bad"}`))
	s.Handler(&ctx)
	line := buf.String()
	for _, want := range []string{`msg="request refused"`, "route=" + api.RouteCreate, "code=invalid_path", "client="} {
		if !strings.Contains(line, want) {
			t.Fatalf("log %q lacks %q", line, want)
		}
	}
	if n := strings.Count(line, "\n"); n != 1 {
		t.Fatalf("%d log lines for one refusal: %q", n, line)
	}
}
