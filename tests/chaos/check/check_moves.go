package check

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/lockservice/lockd/api"
)

// maxReported bounds the violations one checker lists.
const maxReported = 20

// CheckSingleServer is checker m1: at most one cell serves a prefix at
// any instant, from samples of every cell's own state. Two cells serving
// one prefix at the same epoch is a violation however the samples
// overlap; and a cell found serving the prefix at an older epoch in a read
// that started after another cell's read at a newer epoch had returned
// serves it too late (the newer cell served only after the older one was
// sealed: the older one must never serve again, not even restored from a
// backup).
func CheckSingleServer(samples []ServeSample) (int, []Violation) {
	byPrefix := map[string][]ServeSample{}
	n := 0
	for _, s := range samples {
		if s.State == "serving" {
			byPrefix[s.Prefix] = append(byPrefix[s.Prefix], s)
			n++
		}
	}
	var vs []Violation
	add := func(d string) {
		if len(vs) < maxReported {
			vs = append(vs, Violation{"single-server", d})
		}
	}
	for _, p := range slices.Sorted(mapsKeys(byPrefix)) {
		ss := byPrefix[p]
		sort.Slice(ss, func(i, j int) bool { return ss[i].End < ss[j].End })
		sameEpoch := map[uint64]ServeSample{}
		for _, s := range ss {
			if o, ok := sameEpoch[s.Epoch]; ok && o.Cell != s.Cell {
				add(fmt.Sprintf("prefix %s served by cells %s (read %v–%v) and %s (read %v–%v) at the same epoch %d",
					p, o.Cell, o.Start.Round(time.Millisecond), o.End.Round(time.Millisecond), s.Cell, s.Start.Round(time.Millisecond), s.End.Round(time.Millisecond), s.Epoch))
				continue
			}
			sameEpoch[s.Epoch] = s
		}
		// One violation per stale server and newer one, with how many
		// samples showed it.
		type pair struct {
			cell, newer    string
			epoch, newerEp uint64
		}
		seen := map[pair]int{}
		var order []pair
		first := map[pair]string{}
		for _, a := range ss {
			for _, b := range ss {
				if b.End >= a.Start {
					break // sorted by End: no later b returned before a started
				}
				if b.Cell != a.Cell && b.Epoch > a.Epoch {
					k := pair{a.Cell, b.Cell, a.Epoch, b.Epoch}
					if seen[k]++; seen[k] == 1 {
						order = append(order, k)
						first[k] = fmt.Sprintf("prefix %s: cell %s serves it at epoch %d (read %v–%v) after cell %s served it at epoch %d (read returned %v)",
							p, a.Cell, a.Epoch, a.Start.Round(time.Millisecond), a.End.Round(time.Millisecond), b.Cell, b.Epoch, b.End.Round(time.Millisecond))
					}
					break
				}
			}
		}
		for _, k := range order {
			add(fmt.Sprintf("%s; %d samples in all", first[k], seen[k]))
		}
	}
	return n, vs
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// writeFate is what the restores after a write allow of it.
type writeFate int

const (
	fateKept   writeFate = iota // no restore after it could lose it
	fateLost                    // a restore's backup was taken before it was even called
	fateEither                  // it ran while a backup was taken
)

// fateOf decides a write's fate from the restores of its prefix that began
// after it returned (a write still running at a restore is not judged).
func fateOf(w PrefixWrite, restores []RestoreEvent) (writeFate, *RestoreEvent) {
	fate := fateKept
	var by *RestoreEvent
	for i := range restores {
		r := &restores[i]
		if !slices.Contains(r.Prefixes, w.Prefix) || r.Start <= w.Return {
			continue
		}
		switch {
		case w.Return < r.BackupCall:
			// in the backup
		case w.Call > r.BackupReturn:
			return fateLost, r
		default:
			fate, by = fateEither, r
		}
	}
	return fate, by
}

// CheckPrefixWrites is checker m2: every acknowledged value under a prefix
// that moves survives every move, and a restore loses exactly the writes
// after its backup: a write acknowledged before the backup was called
// reads back, one called after the backup returned is gone, one that ran
// while the backup was taken may be either. A restore loses only the
// writes under the prefixes the directory gives the restored cell; writes
// that ran while a restore was under way are not judged.
func CheckPrefixWrites(writes []PrefixWrite, restores []RestoreEvent, final map[string]string, unread map[string]bool) (int, []Violation) {
	var vs []Violation
	n, unreadN, firstUnread := 0, 0, ""
	for _, w := range writes {
		if during(w, restores) {
			continue
		}
		n++
		fate, r := fateOf(w, restores)
		got, ok := final[w.Key]
		var d string
		switch {
		case unread[w.Key]:
			if unreadN++; firstUnread == "" {
				firstUnread = w.Key
			}
		case fate == fateKept && (!ok || got != w.Value):
			d = fmt.Sprintf("acknowledged write %s=%q (acked at %v) lost (read %q, present %v): no restore of %s from a backup before it", w.Key, w.Value, w.Return.Round(time.Millisecond), got, ok, w.Prefix)
		case fate == fateLost && ok:
			d = fmt.Sprintf("write %s=%q (called at %v) survived the restore of cell %s from the backup at index %d returned at %v: a restore must lose exactly the writes after its backup", w.Key, w.Value, w.Call.Round(time.Millisecond), r.Cell, r.BackupIndex, r.BackupReturn.Round(time.Millisecond))
		}
		if d != "" && len(vs) < maxReported {
			vs = append(vs, Violation{"prefix-writes", d})
		}
	}
	if unreadN > 0 {
		vs = append(vs, Violation{"prefix-writes", fmt.Sprintf("%d acknowledged writes could not be read back (the first: %s)", unreadN, firstUnread)})
	}
	return n, vs
}

// during: w ran while a restore of its prefix was under way.
func during(w PrefixWrite, restores []RestoreEvent) bool {
	for _, r := range restores {
		if slices.Contains(r.Prefixes, w.Prefix) && w.Call <= r.End && w.Return >= r.Start {
			return true
		}
	}
	return false
}

// CheckSessionSafe is checker m3: no client is told its session is safe
// after its expiry committed. A claim made after the session was known
// ended, or one whose local lease runs past that moment by more than
// margin (the drift the SDK allows), is a violation: the service expired
// a session while its client was entitled to believe it held.
//
// Sessions ended inside an excused window (a restore drops the sessions
// opened after its backup, by design) are not judged. Sessions are keyed
// by worker and id (ids are per cell).
func CheckSessionSafe(claims []LeaseClaim, ends []SessionEnd, excused []Window, margin time.Duration) (int, []Violation) {
	type key struct {
		w string
		s uint64
	}
	end := map[key]SessionEnd{}
	for _, e := range ends {
		if inWindows(e.By, excused) {
			continue
		}
		k := key{e.Worker, e.Session}
		if o, ok := end[k]; !ok || e.By < o.By {
			end[k] = e
		}
	}
	var vs []Violation
	for _, c := range claims {
		e, ok := end[key{c.Worker, c.Session}]
		if !ok {
			continue
		}
		var d string
		switch {
		case c.At > e.By:
			d = fmt.Sprintf("%s was told session %d is safe (%s) at %v, after its expiry committed (by %v: %s)", c.Worker, c.Session, c.Source, c.At.Round(time.Millisecond), e.By.Round(time.Millisecond), e.How)
		case c.Until > e.By+margin:
			d = fmt.Sprintf("%s's session %d was given a lease until %v (%s at %v), but it expired by %v (%s): %v before the lease it was told", c.Worker, c.Session, c.Until.Round(time.Millisecond), c.Source, c.At.Round(time.Millisecond), e.By.Round(time.Millisecond), e.How, (c.Until - e.By).Round(time.Millisecond))
		}
		if d != "" && len(vs) < maxReported {
			vs = append(vs, Violation{"session-safe", d})
		}
	}
	return len(claims), vs
}

func inWindows(t time.Duration, ws []Window) bool {
	for _, w := range ws {
		if t >= w.Start && t <= w.End {
			return true
		}
	}
	return false
}

// CheckMovedHolds is checker m4: no lock is granted on a new cell while
// the old holder's lease may still run. A grant that returned before the
// holder's local lease (plus its lock-delay) ended, less margin, is a
// violation unless the holder had reported the loss before the grant.
func CheckMovedHolds(holds []MovedHold, margin time.Duration) (int, []Violation) {
	var vs []Violation
	n := 0
	for _, h := range holds {
		if h.Grant == 0 {
			continue
		}
		n++
		if h.Acked && h.Until <= h.Grant {
			continue
		}
		if free := h.Until + h.LockDelay - margin; h.Grant < free && len(vs) < maxReported {
			vs = append(vs, Violation{"moved-lock", fmt.Sprintf("lock %s granted to %s on the new cell at %v while its old holder %s's lease ran until %v (lock-delay %v): %v too early",
				h.Lock, h.Waiter, h.Grant.Round(time.Millisecond), h.Holder, h.Until.Round(time.Millisecond), h.LockDelay, (h.Until + h.LockDelay - h.Grant).Round(time.Millisecond))})
		}
	}
	return n, vs
}

// SplitRestoreEras prepares the moving prefix's config history for the
// linearizability checker across restores: a restore puts each key of the
// restored cell's prefixes back to its backup's state, which no client
// wrote, at some instant between its start (the plan; the old cell may
// still serve a while) and its end (the restored cell serving). So each
// key's history is cut at each such restore into eras (keys "key#N"), the
// later ones starting at the restore's end in an unknown state
// (ConfigEra) that their first definite answer fixes. A get that ran
// across the restore's window is dropped; a write that did may have taken
// effect in either era, so it is in both with an unknown outcome (in the
// later one as if called at the window's end).
func SplitRestoreEras(ops []ConfigOp, restores []RestoreEvent) []ConfigOp {
	var out []ConfigOp
	eraOps := map[string]bool{}
	for _, o := range ops {
		rs := restoresOf(api.Prefix(o.Key), restores)
		name := func(e int) string {
			if e == 0 {
				return o.Key
			}
			k := fmt.Sprintf("%s#%d", o.Key, e)
			if !eraOps[k] {
				eraOps[k] = true
				at := rs[e-1].End
				out = append(out, ConfigOp{Client: math.MaxInt32 - e, Key: k, Kind: ConfigEra, Call: at - 2, Return: at - 1, Outcome: OutcomeOK})
			}
			return k
		}
		era, across := 0, -1
		for j, r := range rs {
			if o.Call <= r.End && o.Return >= r.Start {
				across = j
				break
			}
			if r.End < o.Call {
				era = j + 1
			}
		}
		switch {
		case across < 0:
			c := o
			c.Key = name(era)
			out = append(out, c)
		case o.Kind == ConfigGet:
		default:
			before, after := o, o
			before.Key, before.Outcome = name(across), OutcomeUnknown
			after.Key, after.Outcome, after.Call = name(across+1), OutcomeUnknown, max(o.Call, rs[across].End)
			out = append(out, before, after)
		}
	}
	return out
}

// restoresOf are the restores of prefix's cell, by start.
func restoresOf(prefix string, restores []RestoreEvent) []RestoreEvent {
	var rs []RestoreEvent
	for _, r := range restores {
		if slices.Contains(r.Prefixes, prefix) {
			rs = append(rs, r)
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
	return rs
}
