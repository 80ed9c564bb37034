package check

import (
	"fmt"
	"sort"
	"time"
)

// CheckAcked is checker (d), first half: every write the service
// acknowledged reads back with its value after the run. final holds what
// the final reads found (missing keys are absent); unread are the keys the
// final reads could not read at all, which fail the run too: an
// acknowledged write nobody can read back is not shown to be kept.
func CheckAcked(acked []AckedWrite, final map[string]string, unread map[string]bool) (int, []Violation) {
	var vs []Violation
	for _, a := range acked {
		got, ok := final[a.Key]
		switch {
		case unread[a.Key]:
			vs = append(vs, Violation{"acked-writes", fmt.Sprintf("acknowledged write %s = %q could not be read back", a.Key, a.Value)})
		case !ok:
			vs = append(vs, Violation{"acked-writes", fmt.Sprintf("acknowledged write %s = %q is lost", a.Key, a.Value)})
		case got != a.Value:
			vs = append(vs, Violation{"acked-writes", fmt.Sprintf("acknowledged write %s = %q reads back %q", a.Key, a.Value, got)})
		}
	}
	return len(acked), vs
}

// CheckSessions is checker (d), second half: no session of a healthy
// client ended without being closed. An outage does not excuse a loss by
// itself: a cell with no leader expires nobody (a new leader starts every
// session's lease afresh, less the recorded leaderships it was not
// confirmed under), and a leader that cannot reach a majority steps down
// within an election timeout. The one principled excuse is the client's
// own: it gives a session up after lease + grace without a confirmed
// KeepAlive, so a loss is excused only if the cell committed nothing for
// at least lease + grace (an outage in outages) up to within a lease of
// the loss. Such an outage is itself a liveness failure, reported by the
// bounds checks.
func CheckSessions(losses []SessionLoss, outages []Window, lease, grace time.Duration) (vs []Violation, excused []SessionLoss) {
	for _, l := range losses {
		ok := false
		for _, o := range outages {
			if o.End-o.Start >= lease+grace && o.Start+lease+grace <= l.At && l.At <= o.End+lease {
				ok = true
				break
			}
		}
		if ok {
			excused = append(excused, l)
			continue
		}
		vs = append(vs, Violation{"sessions", fmt.Sprintf("session %d of %s ended at %v without being closed: %s", l.Session, l.Worker, l.At.Round(time.Millisecond), l.Err)})
	}
	return vs, excused
}

// CheckNoQuorum: while fewer than a majority of replicas run, nothing can
// commit and no linearizable read can be served, so no call that started
// inside such a window may have succeeded before it ended. Reads answered
// from a client cache (Local) may: nothing can change while nothing
// commits, and the linearizability checker covers them.
func CheckNoQuorum(ops []Op, windows []Window) (int, []Violation) {
	var vs []Violation
	checked := 0
	for _, w := range windows {
		for _, o := range ops {
			if o.Local || o.Start < w.Start || o.Start > w.End {
				continue
			}
			checked++
			if o.OK && o.End < w.End {
				vs = append(vs, Violation{"no-majority", fmt.Sprintf("%s %s started at %v and succeeded at %v, inside %s [%v, %v]",
					o.Worker, o.Kind, o.Start.Round(time.Millisecond), o.End.Round(time.Millisecond), w.What, w.Start.Round(time.Millisecond), w.End.Round(time.Millisecond))})
			}
		}
	}
	return checked, vs
}

// CheckLiveness is checker (e): once the faults stopped (healAt), every
// waiter was granted again within bound.
func CheckLiveness(grants map[string][]time.Duration, waiters []string, healAt, bound time.Duration) (int, []Violation) {
	var vs []Violation
	ws := append([]string(nil), waiters...)
	sort.Strings(ws)
	for _, w := range ws {
		ok := false
		for _, at := range grants[w] {
			if at >= healAt && at <= healAt+bound {
				ok = true
				break
			}
		}
		if !ok {
			vs = append(vs, Violation{"liveness", fmt.Sprintf("%s was not granted within %v after the faults stopped (at %v)", w, bound, healAt.Round(time.Millisecond))})
		}
	}
	return len(ws), vs
}
