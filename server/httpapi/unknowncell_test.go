package httpapi

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
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
