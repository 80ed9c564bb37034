package sdk

// Tracing a call (WithTrace): where its time went, on the client (encode,
// the HTTP exchange, decode) and in the servers (the api.HeaderServerTiming
// stages a lockd, and a lockproxy on the way, answer a request sent with
// api.HeaderTrace).

import (
	"context"
	"fmt"
	"time"

	"github.com/lockservice/lockd/api"
)

// The client's own stages in Trace.Stages.
const (
	StageClientEncode = "client_encode" // the request's JSON encoding
	StageNet          = "http"          // the exchange less the servers' total: network, HTTP, queueing for a connection
	StageClientDecode = "client_decode" // the reply's JSON decoding
)

// Trace receives the timings of the calls made with a context from
// WithTrace: each call overwrites it, so give each call its own (or read
// it between calls). Its fields describe the last attempt of the last
// call. A Trace is not safe for concurrent calls.
type Trace struct {
	Calls     int           // calls that used this trace
	Attempts  int           // attempts of the last call
	Encode    time.Duration // the request's encoding (last attempt)
	RoundTrip time.Duration // the last attempt's HTTP exchange, sent to reply read
	Decode    time.Duration // the reply's decoding
	// Server is the last attempt's api.HeaderServerTiming, as the server
	// (a lockd, or a lockproxy merging its lockd's) answered it; nil if
	// it answered none or one that does not parse.
	Server []api.TimingStage
	// Tries are the last call's attempts in order, the first
	// MaxTraceAttempts of them: where each went and how it ended.
	Tries []TraceAttempt
}

// MaxTraceAttempts bounds Trace.Tries (Attempts still counts them all).
const MaxTraceAttempts = 32

// TraceAttempt is one attempt of a traced call.
type TraceAttempt struct {
	Addr   string        // the endpoint tried
	Sent   time.Time     // when the request left
	Took   time.Duration // until its reply, or its exchange failed
	Status int           // the reply's HTTP status; 0: no reply
	Code   api.Code      // the reply's error code, if it failed
	Hint   string        // the leader a not_leader reply named
	Err    string        // the exchange's error, without a reply
}

// String is the attempt in one line: "addr 12ms 200", "addr 5s no reply:
// timeout", "addr 3ms 503 not_leader → hint".
func (a TraceAttempt) String() string {
	s := fmt.Sprintf("%s %v", a.Addr, a.Took.Round(time.Millisecond))
	switch {
	case a.Status == 0:
		s += " no reply: " + a.Err
	case a.Code != "":
		s += fmt.Sprintf(" %d %s", a.Status, a.Code)
	default:
		s += fmt.Sprintf(" %d", a.Status)
	}
	if a.Hint != "" {
		s += " → " + a.Hint
	}
	return s
}

type traceKey struct{}

// WithTrace returns ctx asking every call made with it for its stage
// timings (api.HeaderTrace), recorded in t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// traceOf is ctx's trace, nil if none.
func traceOf(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// Stages is the last call's time, stage by stage: the client's encode,
// the network (the exchange less the server's total, all of it when the
// server answered no total), the server's stages but its total, and the
// client's decode.
func (t *Trace) Stages() []api.TimingStage {
	out := make([]api.TimingStage, 0, len(t.Server)+3)
	out = append(out, api.TimingStage{Name: StageClientEncode, Dur: t.Encode})
	net := t.RoundTrip
	if total, ok := api.StageDur(t.Server, api.StageTotal); ok && total <= net {
		net -= total
	}
	out = append(out, api.TimingStage{Name: StageNet, Dur: net})
	for _, st := range t.Server {
		if st.Name != api.StageTotal {
			out = append(out, st)
		}
	}
	return append(out, api.TimingStage{Name: StageClientDecode, Dur: t.Decode})
}

// now is the time, for a trace only (the zero time without one).
func (t *Trace) now() time.Time {
	if t == nil {
		return time.Time{}
	}
	return time.Now()
}

// begin records a new call.
func (t *Trace) begin() {
	if t != nil {
		*t = Trace{Calls: t.Calls + 1}
	}
}

// encoded records an attempt's encoding, begun at start.
func (t *Trace) encoded(start time.Time) {
	if t != nil {
		t.Attempts++
		t.Encode = time.Since(start)
	}
}

// exchanged records an attempt's exchange: sent then, and the reply's
// Server-Timing value (nil for none).
func (t *Trace) exchanged(sent time.Time, serverTiming []byte) {
	t.RoundTrip = time.Since(sent)
	t.Server = nil
	if len(serverTiming) > 0 {
		t.Server, _ = api.ParseServerTiming(string(serverTiming)) // malformed: none
	}
}

// tried records an attempt (r, as observed: o).
func (t *Trace) tried(r attemptResult, o outcome) {
	if t == nil || len(t.Tries) >= MaxTraceAttempts {
		return
	}
	a := TraceAttempt{Addr: r.addr, Sent: r.sent, Status: r.status, Code: o.code, Hint: o.hint}
	if !r.sent.IsZero() {
		a.Took = time.Since(r.sent)
	}
	if r.err != nil {
		a.Err = r.err.Error()
		if len(a.Err) > maxTraceErr {
			a.Err = a.Err[:maxTraceErr] + "…"
		}
	}
	t.Tries = append(t.Tries, a)
}

// maxTraceErr bounds a TraceAttempt's error text.
const maxTraceErr = 120

// decoded records the reply's decoding, begun at start.
func (t *Trace) decoded(start time.Time) {
	if t != nil {
		t.Decode = time.Since(start)
	}
}
