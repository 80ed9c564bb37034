package httpapi

// Traced requests (api.HeaderTrace): the stage clock started when the
// request arrives, carried to the cell in the operation's context, and
// answered in api.HeaderServerTiming.

import (
	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/cell"
)

// traceValue is the request's user-value key of its *cell.Trace.
const traceValue = "lockd.trace"

// startTrace starts a trace for a request that asks for one.
func startTrace(ctx *fasthttp.RequestCtx) {
	if api.TraceRequested(ctx.Request.Header.Peek(api.HeaderTrace)) {
		ctx.SetUserValue(traceValue, cell.NewTrace())
	}
}

// traceOf is the request's trace, nil if it asked for none.
func traceOf(ctx *fasthttp.RequestCtx) *cell.Trace {
	t, _ := ctx.UserValue(traceValue).(*cell.Trace)
	return t
}

// finishTrace marks a traced request's reply encoded and answers its
// stages in api.HeaderServerTiming.
func finishTrace(ctx *fasthttp.RequestCtx) {
	t := traceOf(ctx)
	if t == nil {
		return
	}
	t.Mark(cell.MarkReplied)
	var buf [api.MaxTimingStages]api.TimingStage
	ctx.Response.Header.SetBytesV(api.HeaderServerTiming, api.AppendServerTiming(nil, t.Stages(buf[:0])))
}
