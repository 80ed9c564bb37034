package chaos

import (
	"fmt"
	"sort"

	"github.com/lockservice/lockd/api"
)

// CheckFencing is checker (b), over the protected resource's admitted
// accesses (in order), the grants clients reported and what the service
// said about lock nodes:
//
//   - per lock, the resource never admitted a token lower than one it had
//     already accepted for a write (a shared holder's read does not raise
//     the mark);
//   - every accepted token was granted: some client reported a grant with
//     it, the token is the service's create index of that node (with the
//     prefix's epoch in the high bits), the service saw the node holding,
//     and the node's owner per the service is the session the write came
//     from.
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
	last := map[string]Write{}
	for _, w := range ws {
		what := "write"
		if w.Read {
			what = "read"
		}
		if p, ok := last[w.Lock]; ok && w.Token < p.Token {
			add("%s: %s #%d by %s (session %d) accepted with token %d after write #%d by %s (session %d) with token %d",
				w.Lock, what, w.Seq, w.Writer, w.Session, w.Token, p.Seq, p.Writer, p.Session, p.Token)
		}
		if p, ok := last[w.Lock]; !w.Read && (!ok || w.Token >= p.Token) {
			last[w.Lock] = w
		}
		gs := byToken[key{w.Lock, w.Token}]
		if len(gs) == 0 {
			add("%s: write #%d by %s (session %d) accepted with token %d that no grant carried", w.Lock, w.Seq, w.Writer, w.Session, w.Token)
			continue
		}
		ok := false
		var why string
		for _, g := range gs {
			switch {
			case g.Owner != w.Session:
				why = fmt.Sprintf("token %d is node %s owned by session %d per the service, the write came from session %d", w.Token, g.Node, g.Owner, w.Session)
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
			add("%s: write #%d by %s: %s", w.Lock, w.Seq, w.Writer, why)
		}
	}
	return len(ws), vs
}
