package proxy

// A traced request (api.HeaderTrace) forwarded to a lockd: the lockd's
// stages passed through, with the proxy's own hop added.

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// traceForward returns ctx asking the forwarded call for its lockd's
// stages, and the trace they land in; ctx and nil if the client asked for
// none.
func traceForward(ctx context.Context, rc *fasthttp.RequestCtx) (context.Context, *sdk.Trace) {
	if !api.TraceRequested(rc.Request.Header.Peek(api.HeaderTrace)) {
		return ctx, nil
	}
	tr := &sdk.Trace{}
	return sdk.WithTrace(ctx, tr), tr
}

// answerTrace sets the reply's api.HeaderServerTiming: the lockd's stages
// but its total, the proxy's own time (since arrived, less the upstream
// exchange), the upstream exchange less the lockd's total, and the
// proxy's total. Nothing without a trace.
func answerTrace(rc *fasthttp.RequestCtx, tr *sdk.Trace, arrived time.Time) {
	if tr == nil {
		return
	}
	total := time.Since(arrived)
	stages := make([]api.TimingStage, 0, min(len(tr.Server), api.MaxTimingStages-3)+3)
	for _, st := range tr.Server {
		if st.Name != api.StageTotal && len(stages) < api.MaxTimingStages-3 {
			stages = append(stages, st)
		}
	}
	up := tr.RoundTrip
	if lockd, ok := api.StageDur(tr.Server, api.StageTotal); ok && lockd <= up {
		stages = append(stages, api.TimingStage{Name: api.StageUpNet, Dur: up - lockd})
	}
	stages = append(stages, api.TimingStage{Name: api.StageProxy, Dur: max(total-up, 0)},
		api.TimingStage{Name: api.StageTotal, Dur: total})
	rc.Response.Header.SetBytesV(api.HeaderServerTiming, api.AppendServerTiming(nil, stages))
}
