package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// notQuorum are calls that may succeed without asking the cell: a session
// the client already has, a client close with nothing left to close.
var notQuorum = map[string]bool{"session-open": true, "client-close": true}

// op runs and records one call.
func (e *env) op(worker, kind string, f func() error) error {
	start := e.h.Now()
	err := f()
	e.h.AddOp(check.Op{Worker: worker, Kind: kind, Start: start, End: e.h.Now(), OK: err == nil, Local: notQuorum[kind]})
	return err
}

// tracedOp is op with f's call traced (sdk.WithTrace): a call slower
// than traceSlowAfter keeps its attempts in its record (check.Op.Detail),
// which checker h3 prints when it holds the call too slow.
func (e *env) tracedOp(ctx context.Context, worker, kind string, f func(context.Context) error) error {
	tr := &sdk.Trace{}
	start := e.h.Now()
	err := f(sdk.WithTrace(ctx, tr))
	op := check.Op{Worker: worker, Kind: kind, Start: start, End: e.h.Now(), OK: err == nil, Local: notQuorum[kind]}
	if op.End-op.Start > traceSlowAfter {
		op.Detail = attemptsLine(tr)
	}
	e.h.AddOp(op)
	return err
}

// traceSlowAfter: a traced call this slow keeps its attempts.
const traceSlowAfter = 3 * time.Second

// attemptsLine is tr's attempts in one line, each at its offset from the
// first.
func attemptsLine(tr *sdk.Trace) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d attempts:", tr.Attempts)
	for i, a := range tr.Tries {
		sep := " "
		if i > 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%s+%v %s", sep, a.Sent.Sub(tr.Tries[0].Sent).Round(time.Millisecond), a)
	}
	return b.String()
}

// holding records the periods during which one grant's Context was live,
// on the History's clock (check.Interval): from the grant's return, or
// from when a fresh Context (live again after jeopardy) was first seen,
// until it was cancelled (context.AfterFunc, which runs just after the
// cancel) or Unlock was called.
type holding struct {
	e    *env
	tmpl check.Interval

	mu    sync.Mutex
	seen  map[context.Context]bool
	spans []*liveSpan
}

type liveSpan struct {
	start time.Duration
	ended bool
	stop  func() bool
}

func (e *env) newHolding(lock, node, worker string, mode api.LockMode) *holding {
	return &holding{e: e, tmpl: check.Interval{Lock: lock, Node: node, Worker: worker, Mode: mode}, seen: map[context.Context]bool{}}
}

// live notes that the client is about to act under ctx (first seen at at);
// it reports whether ctx is live.
func (h *holding) live(ctx context.Context, at time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.seen[ctx] {
		h.seen[ctx] = true
		sp := &liveSpan{start: at}
		h.spans = append(h.spans, sp)
		sp.stop = context.AfterFunc(ctx, func() { h.end(sp) })
	}
	return true
}

func (h *holding) end(sp *liveSpan) {
	now := h.e.h.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if sp.ended {
		return
	}
	sp.ended = true
	iv := h.tmpl
	iv.Start, iv.End = sp.start, now
	h.e.h.AddInterval(iv)
}

// release ends every open span: the client is about to call Unlock.
func (h *holding) release() {
	h.mu.Lock()
	spans := h.spans
	h.mu.Unlock()
	for _, sp := range spans {
		sp.stop()
		h.end(sp)
	}
}

// setNode names the node once the holder learns it.
func (h *holding) setNode(node string) {
	h.mu.Lock()
	h.tmpl.Node = node
	h.mu.Unlock()
}

// tmplStart is when the grant returned.
func (h *holding) tmplStart() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.spans) > 0 {
		return h.spans[0].start
	}
	return h.e.h.Now()
}
