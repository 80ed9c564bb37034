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
	byToken := grantsByToken(grants)
	held := heldNodes(obs)
	ws := append([]Write(nil), writes...)
	sort.Slice(ws, func(i, j int) bool { return ws[i].Seq < ws[j].Seq })
	vs := &violationList{checker: "fencing"}
	f := newShadowFence()
	for _, w := range ws {
		f.replay(w, vs)
		if w.Accepted {
			checkGranted(w, byToken[fenceKey{w.Lock, w.Token}], held, vs)
		}
	}
	return len(ws), vs.list
}

// fenceKey is one token of one lock.
type fenceKey struct {
	lock  string
	token uint64
}

// grantsByToken is the reported grants by lock and token.
func grantsByToken(grants []Grant) map[fenceKey][]Grant {
	byToken := map[fenceKey][]Grant{}
	for _, g := range grants {
		k := fenceKey{g.Lock, g.Token}
		byToken[k] = append(byToken[k], g)
	}
	return byToken
}

// heldNodes is the {lock, node} pairs the service was seen holding.
func heldNodes(obs []LockObs) map[[2]string]bool {
	held := map[[2]string]bool{}
	for _, o := range obs {
		if o.Held {
			held[[2]string{o.Lock, o.Node}] = true
		}
	}
	return held
}

// accessKind names an access in a violation: "write" or "read".
func accessKind(w Write) string {
	if w.Read {
		return "read"
	}
	return "write"
}

// shadowFence is CheckFencing's own replay of the resource's fence.
type shadowFence struct {
	mark  map[string]uint64  // the shadow fence: highest accepted write token
	last  map[string]Write   // the last accepted write, per lock
	ended map[fenceKey]Write // tokens whose writes a later token's write followed
}

func newShadowFence() *shadowFence {
	return &shadowFence{mark: map[string]uint64{}, last: map[string]Write{}, ended: map[fenceKey]Write{}}
}

// replay judges one access (in order) against the shadow fence: the
// resource's verdict, a refusal while the writer's Context was live, token
// order; an accepted write then moves the fence.
func (f *shadowFence) replay(w Write, vs *violationList) {
	what := accessKind(w)
	hi, seen := f.mark[w.Lock]
	if want := !seen || w.Token >= hi; want != w.Accepted {
		vs.add("%s: the resource %s %s #%d by %s with token %d against mark %d", w.Lock, verdict(w.Accepted), what, w.Seq, w.Writer, w.Token, hi)
	}
	if !w.Accepted {
		if w.LiveKnown && w.LiveAfter {
			vs.add("%s: %s #%d by %s (session %d) with token %d refused as stale (mark %d) while its lock's Context was still live: two holders at once",
				w.Lock, what, w.Seq, w.Writer, w.Session, w.Token, hi)
		}
		return
	}
	if p, ok := f.last[w.Lock]; ok && w.Token < p.Token {
		vs.add("%s: %s #%d by %s (session %d) accepted with token %d after write #%d by %s (session %d) with token %d",
			w.Lock, what, w.Seq, w.Writer, w.Session, w.Token, p.Seq, p.Writer, p.Session, p.Token)
	}
	if !w.Read {
		f.write(w, vs)
	}
}

// write judges an accepted write for interleaved holders (A, B, A) and
// moves the fence to it.
func (f *shadowFence) write(w Write, vs *violationList) {
	if e, ok := f.ended[fenceKey{w.Lock, w.Token}]; ok {
		vs.add("%s: write #%d by %s with token %d accepted after write #%d with token %d followed its holder's writes: interleaved holders",
			w.Lock, w.Seq, w.Writer, w.Token, e.Seq, e.Token)
	}
	if p, ok := f.last[w.Lock]; ok && p.Token != w.Token {
		f.ended[fenceKey{w.Lock, p.Token}] = w
	}
	f.last[w.Lock] = w
	f.mark[w.Lock] = max(f.mark[w.Lock], w.Token)
}

// checkGranted judges an accepted access's token by the grants reported
// with it (gs): one of them must match the service's node, owner and
// holding.
func checkGranted(w Write, gs []Grant, held map[[2]string]bool, vs *violationList) {
	what := accessKind(w)
	if len(gs) == 0 {
		vs.add("%s: %s #%d by %s (session %d) accepted with token %d that no grant carried", w.Lock, what, w.Seq, w.Writer, w.Session, w.Token)
		return
	}
	var why string
	for _, g := range gs {
		if why = grantMismatch(w, g, what, held); why == "" {
			return
		}
	}
	vs.add("%s: %s #%d by %s: %s", w.Lock, what, w.Seq, w.Writer, why)
}

// grantMismatch says why grant g does not account for access w's token, or
// "" if it does.
func grantMismatch(w Write, g Grant, what string, held map[[2]string]bool) string {
	switch {
	case g.Owner != w.Session:
		return fmt.Sprintf("token %d is node %s owned by session %d per the service, the %s came from session %d", w.Token, g.Node, g.Owner, what, w.Session)
	case api.MakeToken(g.Epoch, g.CreateIndex) != w.Token:
		return fmt.Sprintf("token %d is not MakeToken(%d, create index %d) of node %s", w.Token, g.Epoch, g.CreateIndex, g.Node)
	case !held[[2]string{g.Lock, g.Node}]:
		return fmt.Sprintf("node %s (token %d) was never seen holding by the service", g.Node, w.Token)
	}
	return ""
}

func verdict(accepted bool) string {
	if accepted {
		return "accepted"
	}
	return "refused"
}
