package httpapi

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// TestUnknownCellBehindTheClient: a cell this lockd's view (at index 7)
// lacks is wrong_cell, unless the client routed by a later directory (a
// cell created since): then unavailable and not applied, to be sent
// again. A malformed index is a bad_request.
func TestUnknownCellBehindTheClient(t *testing.T) {
	const view = 7
	cases := []struct {
		name, header string
		code         api.Code
		notApplied   bool
	}{
		{"no index (a client before the header)", "", api.CodeWrongCell, false},
		{"the client's view older", "5", api.CodeWrongCell, false},
		{"the same view", "7", api.CodeWrongCell, false},
		{"the client's view later", "8", api.CodeUnavailable, true},
		{"malformed", "seven", api.CodeBadRequest, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			if tc.header != "" {
				ctx.Request.Header.Set(api.HeaderDirectoryIndex, tc.header)
			}
			ae := api.AsError(unknownCell(&ctx, "fresh1", view))
			if ae == nil || ae.Code != tc.code || ae.NotApplied != tc.notApplied {
				t.Fatalf("%+v; want %s, not_applied %v", ae, tc.code, tc.notApplied)
			}
		})
	}
}

// TestWatchCellBehindTheClient: a watch on a path this lockd's view (at
// index 7, read again) gives to another cell than the request names is
// wrong_cell, unless the client routed by a later directory (a move
// committed since): then unavailable and not applied.
func TestWatchCellBehindTheClient(t *testing.T) {
	dir, err := directory.New(api.DirectoryResponse{Index: 7,
		Cells:    []api.CellInfo{{Name: "c1", ShardID: 1, Prefixes: []string{"/acme"}}, {Name: "c2", ShardID: 2}},
		Prefixes: []api.PrefixInfo{{Prefix: "/acme", Cell: "c1", Epoch: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(noCells{dir: dir}, func() api.StatusResponse { return api.StatusResponse{} }, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	s.dir.gap = 0
	cases := []struct {
		name, cell, header string
		code               api.Code
		notApplied         bool
	}{
		{"the view's cell", "c1", "", "", false},
		{"the view's cell, the client ahead", "c1", "9", "", false},
		{"another cell", "c2", "", api.CodeWrongCell, false},
		{"another cell, the client's view older", "c2", "6", api.CodeWrongCell, false},
		{"another cell, the client's view later", "c2", "8", api.CodeUnavailable, true},
		{"another cell, a malformed index", "c2", "-", api.CodeBadRequest, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			if tc.header != "" {
				ctx.Request.Header.Set(api.HeaderDirectoryIndex, tc.header)
			}
			err := s.watchCell(&ctx, "/acme/x", tc.cell)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("%v; want accepted", err)
				}
				return
			}
			if ae := api.AsError(err); err == nil || ae.Code != tc.code || ae.NotApplied != tc.notApplied {
				t.Fatalf("%v; want %s, not_applied %v", err, tc.code, tc.notApplied)
			}
		})
	}
}
