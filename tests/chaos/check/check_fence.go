package check

import (
	"fmt"
	"sort"

	"github.com/lockservice/lockd/api"
)

// CheckFencing is checker (b), over every access attempt the protected
// resource decided (in order), the grants clients reported and what the
// service said about lock nodes. It does not trust the resource's fence: it
// replays the attempts itself.
//
//   - The resource's verdicts are the fence's rule: per lock, a write is
//     accepted iff its token is at least the highest accepted write token
//     (a shared holder's read likewise, without raising it).
//   - Accepted writes are token-monotonic per lock, and no two holders'
//     accepted writes interleave (A, B, A).
//   - Every accepted token was granted: some client reported a grant with
//     it, the token is the service's create index of that node (with the
//     prefix's epoch in the high bits), the service saw the node holding,
//     and the node's owner per the service is the session the write came
//     from.
//   - The part about the lock service: no client of this process was
//     refused as stale while its lock's Context was still live after the
//     refusal. A refusal means a later holder had already written; a
//     correct service and SDK end the old holder's Context (its lease runs
//     out locally first) before the cell can grant anyone else, so a
//     refused writer that still believes it holds is two holders at once.
//     (A paused holder process's late write is refused as designed; it is
//     not a client of this process, so it is not judged here.)
func CheckFencing(writes []Write, grants []Grant, obs []LockObs) (int, []Violation) {
	var vs []Violation
	add := func(format string, args ...any) {
		vs = append(vs, Violation{"fencing", fmt.Sprintf(format, args...)})
	}
	type key struct {
		lock  string
		token uint64
	}
	byToken := map[key][]Grant{}
	for _, g := range grants {
		k := key{g.Lock, g.Token}
		byToken[k] = append(byToken[k], g)
	}
	held := map[[2]string]bool{}
	for _, o := range obs {
		if o.Held {
			held[[2]string{o.Lock, o.Node}] = true
		}
	}
	ws := append([]Write(nil), writes...)
	sort.Slice(ws, func(i, j int) bool { return ws[i].Seq < ws[j].Seq })
	mark := map[string]uint64{} // the shadow fence: highest accepted write token
	last := map[string]Write{}  // the last accepted write, per lock
	ended := map[key]Write{}    // tokens whose writes a later token's write followed
	for _, w := range ws {
		what := "write"
		if w.Read {
			what = "read"
		}
		hi, seen := mark[w.Lock]
		if want := !seen || w.Token >= hi; want != w.Accepted {
			add("%s: the resource %s %s #%d by %s with token %d against mark %d", w.Lock, verdict(w.Accepted), what, w.Seq, w.Writer, w.Token, hi)
		}
		if !w.Accepted {
			if w.LiveKnown && w.LiveAfter {
				add("%s: %s #%d by %s (session %d) with token %d refused as stale (mark %d) while its lock's Context was still live: two holders at once",
					w.Lock, what, w.Seq, w.Writer, w.Session, w.Token, hi)
			}
			continue
		}
		if p, ok := last[w.Lock]; ok && w.Token < p.Token {
			add("%s: %s #%d by %s (session %d) accepted with token %d after write #%d by %s (session %d) with token %d",
				w.Lock, what, w.Seq, w.Writer, w.Session, w.Token, p.Seq, p.Writer, p.Session, p.Token)
		}
		if !w.Read {
			if e, ok := ended[key{w.Lock, w.Token}]; ok {
				add("%s: write #%d by %s with token %d accepted after write #%d with token %d followed its holder's writes: interleaved holders",
					w.Lock, w.Seq, w.Writer, w.Token, e.Seq, e.Token)
			}
			if p, ok := last[w.Lock]; ok && p.Token != w.Token {
				ended[key{w.Lock, p.Token}] = w
			}
			last[w.Lock] = w
			mark[w.Lock] = max(mark[w.Lock], w.Token)
		}
		gs := byToken[key{w.Lock, w.Token}]
		if len(gs) == 0 {
			add("%s: %s #%d by %s (session %d) accepted with token %d that no grant carried", w.Lock, what, w.Seq, w.Writer, w.Session, w.Token)
			continue
		}
		ok := false
		var why string
		for _, g := range gs {
			switch {
			case g.Owner != w.Session:
				why = fmt.Sprintf("token %d is node %s owned by session %d per the service, the %s came from session %d", w.Token, g.Node, g.Owner, what, w.Session)
			case api.MakeToken(g.Epoch, g.CreateIndex) != w.Token:
				why = fmt.Sprintf("token %d is not MakeToken(%d, create index %d) of node %s", w.Token, g.Epoch, g.CreateIndex, g.Node)
			case !held[[2]string{g.Lock, g.Node}]:
				why = fmt.Sprintf("node %s (token %d) was never seen holding by the service", g.Node, w.Token)
			default:
				ok = true
			}
			if ok {
				break
			}
		}
		if !ok {
			add("%s: %s #%d by %s: %s", w.Lock, what, w.Seq, w.Writer, why)
		}
	}
	return len(ws), vs
}

func verdict(accepted bool) string {
	if accepted {
		return "accepted"
	}
	return "refused"
}
