package fsm

import (
	"math/rand"
	"sort"

	"github.com/lockservice/lockd/api"
)

// genLog is a generated log: entries, and what a reference State answered
// to each when it was generated. The generator applies every entry to the
// reference as it goes, so it can aim at live sessions and existing nodes;
// it reads only sorted views of the reference, so a seed fixes the log.
type genLog struct {
	entries [][]byte
	results [][]byte
	changes [][]Change
	final   *State
}

type generator struct {
	rng      *rand.Rand
	ref      *State
	idx      uint64
	log      genLog
	sessions []uint64             // every session ever opened, in open order
	nextReq  map[uint64]uint64    // last request id used, per session
	sent     map[uint64][]Command // requests sent, per session, for retries
}

var (
	genDirs  = []string{"/demo", "/demo/a", "/demo/a/b", "/demo/l", "/demo/q", "/demo2/x", "/demo2/x/y/z", "/gone/x"}
	genNames = []string{"n1", "n2", "n3"}
	genLocks = []string{"/demo/l", "/demo/q", "/demo2/x"}
)

func generate(seed int64, n int) genLog {
	g := &generator{
		rng:     rand.New(rand.NewSource(seed)),
		ref:     New(),
		nextReq: map[uint64]uint64{},
		sent:    map[uint64][]Command{},
	}
	g.emit((&Command{Op: OpLeaderStart, ReplicaID: 1, Term: 1}).Encode())
	g.emit((&Command{Op: OpEnsurePrefix, Path: "/demo", Epoch: 1}).Encode())
	for len(g.log.entries) < n {
		g.step()
	}
	g.log.final = g.ref
	return g.log
}

func (g *generator) emit(data []byte) {
	g.idx++
	res, ch := g.ref.Apply(g.idx, data)
	g.log.entries = append(g.log.entries, data)
	g.log.results = append(g.log.results, res)
	g.log.changes = append(g.log.changes, ch)
	if r, err := DecodeResult(res); err == nil && r.Err == nil && r.Session == g.idx {
		g.sessions = append(g.sessions, g.idx) // an open_session
	}
}

func (g *generator) pick(a []string) string { return a[g.rng.Intn(len(a))] }

// anySession is a live session mostly, sometimes an ended or never-seen one.
func (g *generator) anySession() uint64 {
	live := g.ref.Sessions()
	switch x := g.rng.Intn(10); {
	case x < 7 && len(live) > 0:
		return live[g.rng.Intn(len(live))].ID
	case x < 9 && len(g.sessions) > 0:
		return g.sessions[g.rng.Intn(len(g.sessions))]
	default:
		return 1<<40 + uint64(g.rng.Intn(3)) // never seen
	}
}

func (g *generator) existing() string {
	paths := nodePaths(g.ref)
	if len(paths) == 0 || g.rng.Intn(5) == 0 {
		return g.pick(genDirs) + "/" + g.pick(genNames)
	}
	return paths[g.rng.Intn(len(paths))]
}

// header gives c a dedupe header half the time (always for ephemerals, which
// need the session anyway, though then only sometimes a request id).
func (g *generator) header(c *Command, needSession bool) {
	if !needSession && g.rng.Intn(2) == 0 {
		return
	}
	sess := g.anySession()
	c.Session = sess
	if g.rng.Intn(4) == 0 {
		return // session, no request id: not deduplicated
	}
	id := g.nextReq[sess] + 1
	if g.rng.Intn(8) == 0 {
		id += uint64(1 + g.rng.Intn(3)) // a gap: a later retry may fill it
	}
	g.nextReq[sess] = id
	c.Request = id
	if g.rng.Intn(3) == 0 && id > 2 {
		c.Ack = id - uint64(1+g.rng.Intn(int(min(id-1, 6))))
	}
	g.sent[sess] = append(g.sent[sess], *c)
}

func (g *generator) step() {
	c := Command{}
	switch x := g.rng.Intn(100); {
	case x < 8:
		c = Command{Op: OpOpenSession, LeaseMS: int64(g.rng.Intn(4)) * 1000}
	case x < 11:
		c = Command{Op: OpCloseSession}
		c.Session = g.anySession()
	case x < 15:
		epoch := g.ref.Epoch()
		if g.rng.Intn(5) == 0 {
			epoch += uint64(g.rng.Intn(3)) - 1 // stale or future: refused
		}
		c = Command{Op: OpExpireSession, Target: g.anySession(), Epoch: epoch, AtMS: int64(g.idx) * 10}
	case x < 16 && g.rng.Intn(2) == 0:
		// End a delay: the one running, or one that a restart replaced.
		c = Command{Op: OpEndLockDelay, Path: g.pick(genLocks)}
		if d, ok := g.ref.LockDelayOf(c.Path); ok {
			c.Since = d.Since - uint64(g.rng.Intn(2))
		}
	case x < 17:
		c = Command{Op: OpLeaderStart, ReplicaID: uint64(1 + g.rng.Intn(3)), Term: g.idx}
	case x < 19:
		c = Command{Op: OpEnsurePrefix, Path: g.pick([]string{"/demo", "/demo2", "/gone"}), Epoch: uint64(g.rng.Intn(5))}
	case x < 52:
		c = Command{Op: OpCreate, MakeParents: g.rng.Intn(4) == 0}
		switch k := g.rng.Intn(6); k {
		case 0, 1: // persistent
			c.Path = g.pick(genDirs) + "/" + g.pick(genNames)
		case 2: // ephemeral
			c.Path = g.pick(genDirs) + "/e" + g.pick(genNames)
			if g.rng.Intn(4) == 0 { // a directory others create below, with make_parents
				c.Path = g.pick(genDirs[1:])
			}
			c.Ephemeral = true
		case 3: // sequential, sometimes ephemeral
			c.Path = g.pick(genDirs) + "/s-"
			c.Sequential = true
			c.Ephemeral = g.rng.Intn(2) == 0
		default: // lock
			c.Path = g.pick(genLocks) + "/lk-"
			c.Ephemeral, c.Sequential = true, true
			c.Lock = api.LockExclusive
			if g.rng.Intn(2) == 0 {
				c.Lock = api.LockShared
			}
			if g.rng.Intn(2) == 0 {
				c.LockDelayMS = int64(g.rng.Intn(3)) * 1000
			}
		}
		if g.rng.Intn(3) == 0 {
			c.Value = []byte{byte(g.rng.Intn(256)), 'v'}
		}
		g.header(&c, c.Ephemeral)
	case x < 67:
		c = Command{Op: OpPut, Path: g.existing(), Value: []byte{'p', byte(g.rng.Intn(256))}, MakeParents: g.rng.Intn(4) == 0}
		switch g.rng.Intn(4) {
		case 0: // unconditional
		case 1:
			c.Version = u64(0)
		default:
			v := uint64(g.rng.Intn(3))
			if n, ok := g.ref.Get(c.Path); ok && g.rng.Intn(3) > 0 {
				v = n.Version
			}
			c.Version = &v
		}
		g.header(&c, false)
	case x < 84:
		c = Command{Op: OpDelete, Path: g.existing()}
		if g.rng.Intn(4) == 0 {
			v := uint64(1 + g.rng.Intn(2))
			c.Version = &v
		}
		g.header(&c, false)
	case x < 96: // leader_tick or confirm, mostly under the current epoch
		epoch := g.ref.Epoch()
		if g.rng.Intn(6) == 0 {
			epoch += uint64(g.rng.Intn(3)) - 1
		}
		switch g.rng.Intn(3) {
		case 0:
			c = Command{Op: OpLeaderTick, Epoch: epoch, ElapsedMS: int64(g.rng.Intn(30_000))}
		case 1: // a hand-over's record (none listed: its cancel)
			c = Command{Op: OpHandOver, Epoch: epoch}
			for range g.rng.Intn(4) {
				c.Sessions = append(c.Sessions, g.anySession())
				c.SilentMS = append(c.SilentMS, int64(g.rng.Intn(15_000)))
			}
		default:
			c = Command{Op: OpConfirm, Epoch: epoch}
			for range g.rng.Intn(4) {
				c.Sessions = append(c.Sessions, g.anySession())
			}
		}
	case x < 98: // retry an earlier request of some session
		ids := make([]uint64, 0, len(g.sent))
		for id := range g.sent {
			ids = append(ids, id)
		}
		if len(ids) == 0 {
			return
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		reqs := g.sent[ids[g.rng.Intn(len(ids))]]
		// Mostly recent ones, sometimes one that may have left the window.
		back := g.rng.Intn(min(len(reqs), 8))
		if g.rng.Intn(10) == 0 {
			back = g.rng.Intn(len(reqs))
		}
		c = reqs[len(reqs)-1-back]
	default:
		g.emit([]byte{'{', byte(g.rng.Intn(256)), '"'}) // undecodable
		return
	}
	g.emit(c.Encode())
}
