package chaos

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// prober measures fail-over from the client side of the cell: a few
// clients put to probe keys back to back, each call with a short deadline
// (a fresh call starts with a fresh backoff). A put proposed after the
// leader was killed, paused or cut off can only be committed by a new
// leader, so the first put acknowledged among those started after the
// fault is the first commit under the new leader.
type prober struct {
	mu   sync.Mutex
	acks []probeAck // in order of completion
}

type probeAck struct{ start, end time.Duration }

func (p *prober) add(start, end time.Duration) {
	p.mu.Lock()
	p.acks = append(p.acks, probeAck{start, end})
	p.mu.Unlock()
}

// firstAfter returns the end of the first put acknowledged among those
// started at or after t.
func (p *prober) firstAfter(t time.Duration) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	best, ok := time.Duration(0), false
	for i := len(p.acks) - 1; i >= 0; i-- {
		a := p.acks[i]
		if a.end < t {
			break // appended in completion order (to within microseconds)
		}
		if a.start >= t && (!ok || a.end < best) {
			best, ok = a.end, true
		}
	}
	return best, ok
}

// outages are the periods of at least min, up to until, in which no probe
// put was acknowledged: the cell committed nothing.
func (p *prober) outages(min, until time.Duration) []check.Window {
	p.mu.Lock()
	ends := make([]time.Duration, len(p.acks))
	for i, a := range p.acks {
		ends[i] = a.end
	}
	p.mu.Unlock()
	sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
	var out []check.Window
	for i := 1; i <= len(ends); i++ {
		next := until
		if i < len(ends) {
			next = ends[i]
		}
		if next-ends[i-1] >= min {
			out = append(out, check.Window{Start: ends[i-1], End: next, What: "no commit"})
		}
	}
	return out
}

// probeWorker puts to its key under base back to back, recording each
// acknowledged put in p.
func (e *env) probeWorker(p *prober, name, base string) {
	c, err := e.newClient(name, false, e.cfg.ProbeTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	key := fmt.Sprintf("%s/%s", base, name)
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		ctx, cancel := context.WithTimeout(e.ctx, e.cfg.ProbeCall)
		start := e.h.Now()
		_, err := c.Put(ctx, key, []byte(fmt.Sprint(i)), sdk.MakeParents())
		cancel()
		end := e.h.Now()
		e.h.AddOp(check.Op{Worker: name, Kind: "probe-put", Start: start, End: end, OK: err == nil})
		if err == nil {
			p.add(start, end)
		}
		sleepCtx(e.ctx, e.cfg.ProbeGap)
	}
}
