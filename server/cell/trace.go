package cell

// A traced request's stage clock (api.HeaderTrace): the points a request
// passes, as monotonic nanoseconds, turned into api.HeaderServerTiming
// stages. Untraced requests carry no Trace and pay one nil check per
// mark; the leader's applies are timed only while a traced proposal
// waits (applyClock).

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
)

// Mark is one point a traced request passes, in the order it passes them.
type Mark uint8

// The marks, in order. A stage spans from the previous mark reached to
// the next one (stageEnding names it).
const (
	MarkReceived   Mark = iota // the HTTP handler began
	MarkOpStart                // decoded, authorized, checked, cell found: the operation begins
	MarkFenced                 // propose begins: the write's preconditions (cache fence) are met
	MarkPropose                // the log entry is encoded: SyncPropose is called
	MarkApplyStart             // the leader's apply of the entry began
	MarkApplyEnd               // the state machine applied it
	MarkHooksEnd               // afterApply ended
	MarkReturned               // SyncPropose returned
	MarkReplied                // the reply is encoded
	numMarks
)

// stageEnding names the stage that ends at each mark.
var stageEnding = [numMarks]string{
	MarkOpStart:    api.StageDecode,
	MarkFenced:     api.StageQueue,
	MarkPropose:    api.StageEntry,
	MarkApplyStart: api.StageCommit,
	MarkApplyEnd:   api.StageApply,
	MarkHooksEnd:   api.StageHooks,
	MarkReturned:   api.StageWake,
	MarkReplied:    api.StageReply,
}

// Trace is one traced request's stage clock: when it passed each mark,
// in monotonic nanoseconds (monoNow), 0 for a mark not reached. One
// goroutine at a time fills it (the request's); the apply marks are
// copied from the cell's applyClock once SyncPropose returns. A nil
// *Trace records nothing.
type Trace struct{ at [numMarks]int64 }

// NewTrace starts a trace received now.
func NewTrace() *Trace {
	t := &Trace{}
	t.at[MarkReceived] = monoNow()
	return t
}

// Mark records that the request passes m now.
func (t *Trace) Mark(m Mark) {
	if t != nil {
		t.at[m] = monoNow()
	}
}

// Stages appends to dst the stages from the marks reached: each from the
// previous mark reached to its own, then the total. A proposal whose
// apply was not seen (its slot in the apply clock reused) shows commit up
// to SyncPropose's return.
func (t *Trace) Stages(dst []api.TimingStage) []api.TimingStage {
	if t == nil {
		return dst
	}
	prev := MarkReceived
	for m := MarkOpStart; m < numMarks; m++ {
		if t.at[m] == 0 || t.at[prev] == 0 {
			continue
		}
		name := stageEnding[m]
		if prev == MarkPropose {
			name = api.StageCommit // no apply marks: commit through the return
		}
		dst = append(dst, api.TimingStage{Name: name, Dur: time.Duration(t.at[m] - t.at[prev])})
		prev = m
	}
	if t.at[prev] != 0 && prev != MarkReceived {
		dst = append(dst, api.TimingStage{Name: api.StageTotal, Dur: time.Duration(t.at[prev] - t.at[MarkReceived])})
	}
	return dst
}

// traceBase is the origin of monoNow.
var traceBase = time.Now()

// monoNow is the monotonic clock in nanoseconds since traceBase, never 0.
func monoNow() int64 { return int64(time.Since(traceBase)) + 1 }

type traceKey struct{}

// WithTrace returns ctx carrying t: the cell marks the operation's
// points in it.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// traceOf is ctx's trace, nil if none.
func traceOf(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// applyClockSlots bounds the entries whose apply times a cell keeps: a
// traced proposal reads its entry's slot right after SyncPropose returns,
// before that many more entries applied (else its apply stages are left
// out).
const applyClockSlots = 512

// applyClock keeps, while a traced proposal waits (waiting > 0), when
// each entry's apply began and ended and when its afterApply ended on
// this replica, in a ring indexed by the entry's log index. The apply
// goroutine writes (Update), the proposer reads (copyTo); a slot is
// written index-last and read index-checked twice, so a torn read is
// discarded, never used.
type applyClock struct {
	waiting atomic.Int32
	slots   [applyClockSlots]applySlot
}

type applySlot struct {
	index                 atomic.Uint64
	start, applied, hooks atomic.Int64
}

// on reports whether applies are to be timed now.
func (a *applyClock) on() bool { return a.waiting.Load() > 0 }

// record stores entry index's apply times.
func (a *applyClock) record(index uint64, start, applied, hooks int64) {
	s := &a.slots[index%applyClockSlots]
	s.index.Store(0)
	s.start.Store(start)
	s.applied.Store(applied)
	s.hooks.Store(hooks)
	s.index.Store(index)
}

// copyTo copies entry index's apply times into t, if its slot still
// holds them.
func (a *applyClock) copyTo(t *Trace, index uint64) {
	s := &a.slots[index%applyClockSlots]
	if index == 0 || s.index.Load() != index {
		return
	}
	start, applied, hooks := s.start.Load(), s.applied.Load(), s.hooks.Load()
	if s.index.Load() != index {
		return
	}
	t.at[MarkApplyStart], t.at[MarkApplyEnd], t.at[MarkHooksEnd] = start, applied, hooks
}
