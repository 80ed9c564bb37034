package httpapi

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// TestServerTimingOnlyWhenAsked: a create sent with Lockd-Trace is
// answered with a Server-Timing header that parses and ends with the
// total; one sent without it (or with "0") gets none.
func TestServerTimingOnlyWhenAsked(t *testing.T) {
	dir, err := directory.New(api.DirectoryResponse{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(noCells{dir: dir}, func() api.StatusResponse { return api.StatusResponse{} }, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	s.dir.gap = 0
	for _, tc := range []struct {
		name   string
		trace  string // the Lockd-Trace header, "" for none
		timing bool
	}{
		{"untraced", "", false},
		{"trace off", "0", false},
		{"traced", "1", true},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI(api.RouteCreate)
		ctx.Request.Header.Set(api.HeaderWaitLeaderMS, "0")
		if tc.trace != "" {
			ctx.Request.Header.Set(api.HeaderTrace, tc.trace)
		}
		ctx.Request.SetBody([]byte(`{"path":"/demo/lock","ephemeral":true,"lock":"exclusive"}`))
		s.Handler(&ctx)
		v := ctx.Response.Header.Peek(api.HeaderServerTiming)
		if got := len(v) > 0; got != tc.timing {
			t.Errorf("%s: Server-Timing %q, want one: %v", tc.name, v, tc.timing)
			continue
		}
		if !tc.timing {
			continue
		}
		stages, err := api.ParseServerTiming(string(v))
		if err != nil || len(stages) == 0 || stages[len(stages)-1].Name != api.StageTotal {
			t.Errorf("%s: Server-Timing %q: %v, want stages ending with the total", tc.name, v, err)
		}
	}
}
