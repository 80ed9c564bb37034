package fsm

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestAttackUpgradeTokenOrder: the write lock's grants in a directory
// carry rising fencing tokens, whatever the order of upgrades: a writer
// granted after an upgraded writer carries a higher token than it (a
// resource fencing on the highest token seen must not refuse the next
// legitimate writer). Two queues: an upgradable node that holds with a
// writer queued behind it, and one that waits behind a writer.
//
// Found by the issue-26 review (the upgrade took a new token, its
// entry's index, above the writers queued behind it): an upgrade now
// keeps the node's create-index token (rwlock.go; mutant
// RWUpgradeNewToken).
func TestAttackUpgradeTokenOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		modes []api.LockMode
		up    int // the upgradable node
	}{
		{"upgradable holds, writer behind", []api.LockMode{up, ex}, 0},
		{"upgradable waits behind a writer, writer behind it", []api.LockMode{ex, up, ex}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newDemo(t)
			h.ok(createCmd("/demo/l"))
			sess, paths := rwQueue(h, tc.modes...)
			r := h.apply(modeCmd(sess[tc.up], paths[tc.up], ex))
			if r.Err != nil {
				t.Skipf("upgrade refused (%v): no inversion possible", r.Err)
			}
			var last uint64
			for i := range paths {
				exists, held, wf, tok := h.s.LockState(paths[i])
				if !exists || !held {
					t.Fatalf("%s: exists %v held %v waits for %s", paths[i], exists, held, wf)
				}
				if tok <= last {
					t.Fatalf("%s granted the write lock with token %x after a writer with %x: tokens fall", paths[i], tok, last)
				}
				last = tok
				h.ok(delCmd(paths[i], nil))
			}
		})
	}
}

// Bounds of the issue-26 random attack.
const (
	attack26Seeds = 12  // logs generated
	attack26Steps = 400 // entries per log
)

var (
	attack26Sems = []string{"/demo/s/a/sem", "/demo/s/b/sem"} // semaphores of 2 permits, in containers
	attack26RWs  = []string{"/demo/r/x/rw", "/demo/r/y/rw"}   // read-write locks, in containers
)

// attack26Gen generates a log of issue 26's vocabulary (permits,
// upgradable nodes, set_lock_mode, container directories, lock-delays)
// mixed with session ends and deletes, applying it to h as it goes (the
// harness checks the invariants and that no holder stops holding).
type attack26Gen struct {
	t       *testing.T
	h       *harness
	rng     *rand.Rand
	live    []uint64
	locks   []string            // lock nodes created (some gone)
	entries [][]byte            // the log
	results [][]byte            // h's encoded result per entry
	granted map[string]uint64   // per semaphore: the highest token granted so far
	seen    map[string]struct{} // permit (path, token) grants seen
	applied map[string]int      // what the log did, for the coverage guard
}

func (g *attack26Gen) emit(c Command) Result {
	data := c.Encode()
	r := g.h.applyBytes(data)
	g.entries = append(g.entries, data)
	g.results = append(g.results, g.h.raw)
	g.checkPermitGrants()
	if r.Err == nil {
		g.applied[string(c.Op)+" "+string(c.Lock)]++
	}
	for _, ch := range g.h.changes {
		if ch.Type == ChangeDeleted && (ch.Path == "/demo/s/a" || ch.Path == "/demo/r/x") {
			g.applied["container deleted"]++
		}
	}
	return r
}

// checkPermitGrants: at most 2 hold each semaphore, and each new grant's
// token is above every token granted on it before (across its
// containers' deletes and re-creates).
func (g *attack26Gen) checkPermitGrants() {
	for _, dir := range attack26Sems {
		_, holders := g.h.s.CheckToken(dir, 0)
		if len(holders) > 2 {
			g.t.Fatalf("index %d: %s has %d holders", g.h.idx, dir, len(holders))
		}
		for _, tok := range holders {
			key := fmt.Sprint(dir, tok)
			if _, ok := g.seen[key]; ok {
				continue
			}
			if tok <= g.granted[dir] {
				g.t.Fatalf("index %d: %s granted token %x after %x", g.h.idx, dir, tok, g.granted[dir])
			}
			g.seen[key] = struct{}{}
		}
		for _, tok := range holders {
			g.granted[dir] = max(g.granted[dir], tok)
		}
	}
}

func (g *attack26Gen) session() uint64 {
	if len(g.live) == 0 || g.rng.Intn(10) == 0 {
		id := g.emit(Command{Op: OpOpenSession}).Session
		g.live = append(g.live, id)
		return id
	}
	return g.live[g.rng.Intn(len(g.live))]
}

func (g *attack26Gen) endSession() {
	if len(g.live) == 0 {
		return
	}
	i := g.rng.Intn(len(g.live))
	id := g.live[i]
	g.live = append(g.live[:i], g.live[i+1:]...)
	if g.rng.Intn(2) == 0 {
		g.emit(closeCmd(id))
		return
	}
	c := expireCmd(id, g.h.s.Epoch())
	c.AtMS = int64(g.h.idx) * 10
	g.emit(c)
}

// lockNode picks a lock node that exists (forgetting those gone).
func (g *attack26Gen) lockNode() (string, api.Node, bool) {
	live := g.locks[:0]
	for _, p := range g.locks {
		if exists(g.h.s, p) {
			live = append(live, p)
		}
	}
	g.locks = live
	if len(g.locks) == 0 {
		return "", api.Node{}, false
	}
	p := g.locks[g.rng.Intn(len(g.locks))]
	n, ok := g.h.s.Get(p)
	return p, n, ok
}

// modeFor is a mode change to try on n: mostly an allowed one.
func (g *attack26Gen) modeFor(n api.Node) api.LockMode {
	switch {
	case g.rng.Intn(6) == 0:
		return []api.LockMode{ex, sh, up, api.LockPermit, "bogus"}[g.rng.Intn(5)]
	case n.Lock == up:
		return []api.LockMode{ex, ex, sh}[g.rng.Intn(3)]
	default:
		return []api.LockMode{sh, up}[g.rng.Intn(2)]
	}
}

func (g *attack26Gen) step() {
	switch x := g.rng.Intn(100); {
	case x < 8:
		g.endSession()
	case x < 30:
		n := int64(2)
		if g.rng.Intn(12) == 0 {
			n = int64(1 + g.rng.Intn(3)) // a disagreeing N: refused
		}
		c := permitCmd(g.session(), attack26Sems[g.rng.Intn(2)], n)
		c.Container = true
		c.LockDelayMS = int64(g.rng.Intn(2)) * 1000
		if r := g.emit(c); r.Err == nil {
			g.locks = append(g.locks, r.Node.Path)
		}
	case x < 55:
		mode := []api.LockMode{ex, sh, up}[g.rng.Intn(3)]
		c := recipeLock(g.session(), attack26RWs[g.rng.Intn(2)], mode, int64(g.rng.Intn(2))*1000)
		if r := g.emit(c); r.Err == nil {
			g.locks = append(g.locks, r.Node.Path)
		}
	case x < 72:
		p, n, ok := g.lockNode()
		if !ok {
			return
		}
		sess := n.Owner
		if g.rng.Intn(8) == 0 {
			sess = g.session()
		}
		g.emit(modeCmd(sess, p, g.modeFor(n)))
	case x < 92:
		p, n, ok := g.lockNode()
		if !ok {
			return
		}
		g.emit(Command{Op: OpDelete, Path: p, WriteHeader: api.WriteHeader{Session: n.Owner}})
	case x < 97:
		dir := append(append([]string{}, attack26Sems...), attack26RWs...)[g.rng.Intn(4)]
		if d, ok := g.h.s.LockDelayOf(dir); ok {
			g.emit(endDelayCmd(dir, d.Since))
		}
	default:
		g.emit(Command{Op: OpLeaderStart, ReplicaID: 1, Term: g.h.idx})
	}
}

// TestAttackIssue26Random: random logs of issue 26's vocabulary keep
// the invariants (the harness), at most N permit holders with rising
// tokens; the same log applied twice gives the same results and
// byte-identical snapshots, and a snapshot taken mid-log (mid-queue),
// restored and fed the rest of the log ends in the same bytes.
func TestAttackIssue26Random(t *testing.T) {
	for seed := int64(1); seed <= attack26Seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := &attack26Gen{t: t, h: newDemo(t), rng: rand.New(rand.NewSource(seed)),
				granted: map[string]uint64{}, seen: map[string]struct{}{}, applied: map[string]int{}}
			ls, en := Command{Op: OpLeaderStart, ReplicaID: 1, Term: 1}, ensureCmd("/demo", 1)
			prefix := [][]byte{ls.Encode(), en.Encode()}
			for range attack26Steps {
				g.step()
			}
			for _, k := range []string{"create permit", "create upgradable", "set_lock_mode exclusive", "set_lock_mode shared", "end_lock_delay ", "container deleted"} {
				if g.applied[k] == 0 {
					t.Errorf("the log never applied %q: %v", k, g.applied)
				}
			}
			final := g.h.snap()
			b := newHarness(t)
			for _, e := range prefix {
				b.applyBytes(e)
			}
			var mid []byte
			for i, e := range g.entries {
				b.applyBytes(e)
				if !bytes.Equal(b.raw, g.results[i]) {
					t.Fatalf("entry %d: results differ", i)
				}
				if i == len(g.entries)/2 {
					mid = b.snap()
				}
			}
			if !bytes.Equal(b.snap(), final) {
				t.Fatal("the same log gave different snapshots")
			}
			c := harnessOn(t, restore(t, mid))
			for i := len(g.entries)/2 + 1; i < len(g.entries); i++ {
				c.applyBytes(g.entries[i])
				if !bytes.Equal(c.raw, g.results[i]) {
					t.Fatalf("entry %d after a restore: results differ", i)
				}
			}
			if !bytes.Equal(c.snap(), final) {
				t.Fatal("restored mid-log, the rest of the log gave a different snapshot")
			}
		})
	}
}
