package proxy

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// TestAnswerTrace: a traced request forwarded to a lockd is answered with
// the lockd's stages, the upstream network, the proxy's own hop and the
// proxy's total; an untraced one with no Server-Timing.
func TestAnswerTrace(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		asked bool
		tr    sdk.Trace
		want  []string // stage names, in order
	}{
		{"untraced", false, sdk.Trace{}, nil},
		{"lockd answered", true, sdk.Trace{RoundTrip: 4 * ms, Server: []api.TimingStage{{Name: api.StageCommit, Dur: 2 * ms}, {Name: api.StageTotal, Dur: 3 * ms}}},
			[]string{api.StageCommit, api.StageUpNet, api.StageProxy, api.StageTotal}},
		{"lockd answered none", true, sdk.Trace{RoundTrip: 4 * ms}, []string{api.StageProxy, api.StageTotal}},
	} {
		var rc fasthttp.RequestCtx
		if tc.asked {
			rc.Request.Header.Set(api.HeaderTrace, "1")
		}
		_, tr := traceForward(t.Context(), &rc)
		if (tr != nil) != tc.asked {
			t.Fatalf("%s: trace %v, asked %v", tc.name, tr, tc.asked)
		}
		if tr != nil {
			*tr = tc.tr
		}
		answerTrace(&rc, tr, time.Now().Add(-5*ms))
		v := rc.Response.Header.Peek(api.HeaderServerTiming)
		stages, err := api.ParseServerTiming(string(v))
		if err != nil || len(stages) != len(tc.want) {
			t.Fatalf("%s: Server-Timing %q (%v), want stages %v", tc.name, v, err, tc.want)
		}
		for i, st := range stages {
			if st.Name != tc.want[i] {
				t.Fatalf("%s: Server-Timing %q, want stages %v", tc.name, v, tc.want)
			}
		}
	}
}
