// Package fake is an in-process fake of a lockd cell, a double for unit
// tests and runnable examples only. It serves the HTTP API over real
// fasthttp on loopback (or an in-memory network, Options.Memory), and its rules are the real cell's: it holds a real
// fsm.State (server/fsm) and applies to it the entries a real cell would
// propose for each request (entries.go), so node trees, sequential names,
// dedupe by (session, request id), secrets, lock queues, lock-delays and
// session ends are the state machine's own, and its answers carry the
// same api types and codes. Its watches are the real watch table's
// (server/watch). What a lockd refuses before it finds the cell (the
// cell a request names, watch kinds, the named limits) it refuses with
// the same answers (checks.go).
//
// What it fakes is what is not the state machine: which replica leads and
// fail-over (SetLeader, Failover: a leader_start entry), when a session
// expires (Expire: an expire_session entry; no lease is timed), KeepAlive
// (the long poll and the event queues, without confirmation rounds),
// delivery of watch events, and faults (a Hook drops, delays or answers
// any request). It checks nothing lockd guarantees across replicas.
//
// The sdk, ctl and proxy unit tests and the sdk examples share it, so
// there is one fake.
package fake

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
	"github.com/lockservice/lockd/server/watch"
)

// prefixEpoch is the directory epoch of every prefix the fake serves
// (the high bits of its fencing tokens).
const prefixEpoch = 1

// Options configures a Cell. Zero values take the defaults noted.
type Options struct {
	Name     string   // cell name; "demo-cell"
	Prefixes []string // prefixes served; ["/demo"] (each prefix's root node exists)
	Replicas int      // replicas, each at its own address; 1
	Epoch    uint64   // initial leader epoch; 1
	Term     uint64   // Raft term reported by /v1/status; the epoch
	// Memory puts the replicas on an in-memory network instead of
	// loopback ports: clients connect through Cell.Dial (sdk.Config.Dial),
	// and may run with the fake in a testing/synctest bubble (memnet.go).
	Memory bool
	// Timing is the cell's own timing (nil: the lockds' defaults), as
	// the directory lists it: its lease is the default lease, and a
	// session open's reply carries its keepalive and grace (server/cell
	// sessions.go). New refuses one api.CellTiming.Check refuses.
	Timing *api.CellTiming
	// NoWire makes the cell a lockd older than the binary KeepAlive
	// encoding (wire.go): it reads every body as JSON.
	NoWire bool
	// IdleTimeout is how long a replica keeps an idle client connection
	// open before closing it; 1 s.
	IdleTimeout time.Duration
}

// Request is one request a replica received.
type Request struct {
	Replica int
	Route   string
	Body    []byte // as JSON when it came in the binary encoding, unless NoWire
	Auth    string // Authorization header
	// DirIndex is the api.HeaderDirectoryIndex header ("": none).
	DirIndex string
	// Wire: the request came in the binary encoding (api.ContentTypeWire).
	Wire bool
}

// WatchKey names a watch: a path and its kind.
type WatchKey struct {
	Path string
	Kind api.WatchKind
}

// Hook intercepts a request to replica on route; next runs the fake's own
// handling. The response is a status and a reply value (an *api.Error for
// an error; status 0 then takes the code's HTTP status). Hooks run without
// the cell's lock held, so they may call the Cell's methods.
type Hook func(replica int, route string, body []byte, next func() (int, any)) (int, any)

type replica struct {
	idx  int
	addr string
	srv  *fasthttp.Server
	ln   net.Listener
	done chan struct{}
}

// Cell is a running fake cell. All methods are safe for concurrent use.
type Cell struct {
	name     string
	prefixes []string
	timing   *api.CellTiming // nil: the defaults
	noWire   bool            // Options.NoWire

	mu        sync.Mutex
	replicas  []*replica
	endpoints []string // as listed in the directory
	leader    int      // replica index; -1 for none
	hint      bool     // followers name the leader in not_leader
	// st is the cell's state machine, the real one: every write is an
	// entry applied to it (entries.go).
	st *fsm.State
	// watches and sessions are the leader's soft state beside it: its
	// watch table (the real one) and, per live session, its lease and
	// queued events (keepalive.go).
	watches   *watch.Table
	sessions  map[uint64]*session
	evSeq     uint64 // last event seq handed out (grows for the cell's life)
	reqs      []Request
	hook      Hook
	wake      chan struct{} // closed and replaced on every change long-polls care about
	closed    chan struct{}
	closeOnce sync.Once
}

// New starts a fake cell whose replica 0 leads. Close it when done.
func New(o Options) (*Cell, error) {
	if o.Name == "" {
		o.Name = "demo-cell"
	}
	if len(o.Prefixes) == 0 {
		o.Prefixes = []string{"/demo"}
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Epoch == 0 {
		o.Epoch = 1
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = time.Second
	}
	if o.Term < o.Epoch {
		o.Term = o.Epoch
	}
	if o.Timing != nil {
		if err := o.Timing.Check(); err != nil {
			return nil, err
		}
		t := *o.Timing
		o.Timing = &t
	}
	c := &Cell{
		name:     o.Name,
		prefixes: slices.Clone(o.Prefixes),
		timing:   o.Timing,
		noWire:   o.NoWire,
		hint:     true,
		st:       fsm.New(),
		sessions: map[uint64]*session{},
		wake:     make(chan struct{}),
		closed:   make(chan struct{}),
	}
	c.watches = watch.NewTable(sink{c})
	if err := c.start(o.Epoch, o.Term); err != nil {
		return nil, err
	}
	for i := range o.Replicas {
		ln, err := c.listen(o.Memory, i)
		if err != nil {
			c.Close()
			return nil, err
		}
		r := &replica{idx: i, addr: ln.Addr().String(), ln: ln, done: make(chan struct{})}
		r.srv = &fasthttp.Server{
			Handler:               func(ctx *fasthttp.RequestCtx) { c.serve(r.idx, ctx) },
			MaxIdleWorkerDuration: 20 * time.Millisecond,
			IdleTimeout:           o.IdleTimeout,
			CloseOnShutdown:       true,
			// No Date header: fasthttp's process-wide ticker that keeps
			// it would start inside a synctest bubble and never end.
			NoDefaultDate: o.Memory,
		}
		c.replicas = append(c.replicas, r)
		c.endpoints = append(c.endpoints, r.addr)
		go func() {
			defer close(r.done)
			_ = r.srv.Serve(ln)
		}()
	}
	return c, nil
}

// start commits what a new cell's log begins with: leader_start entries
// up to the leader epoch, the last of them in term, then each prefix's
// ensure_prefix.
func (c *Cell) start(epoch, term uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := uint64(1); e <= epoch; e++ {
		if err := c.leaderStartLocked(term - epoch + e); err != nil {
			return fmt.Errorf("fake: leader_start: %w", err)
		}
	}
	for _, p := range c.prefixes {
		res := c.proposeLocked(&fsm.Command{Op: fsm.OpEnsurePrefix, Path: p, Epoch: prefixEpoch, AtMS: time.Now().UnixMilli()})
		if res.Err != nil {
			return fmt.Errorf("fake: prefix %s: %w", p, res.Err)
		}
	}
	return nil
}

// Close stops every replica, ending long-polls in flight.
func (c *Cell) Close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		for _, r := range c.replicas {
			_ = r.srv.Shutdown()
			// A Shutdown that runs before Serve has registered the
			// listener leaves Serve accepting: close it ourselves.
			_ = r.ln.Close()
			<-r.done
		}
	})
}

// Name is the cell's name.
func (c *Cell) Name() string { return c.name }

// Addr is replica i's API address.
func (c *Cell) Addr(i int) string { return c.replicas[i].addr }

// Endpoints are the cell's endpoints as the directory lists them.
func (c *Cell) Endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.endpoints)
}

// SetEndpoints changes the endpoints the directory lists (say, to put a
// dead address first).
func (c *Cell) SetEndpoints(eps []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endpoints = slices.Clone(eps)
}

// DeadAddr is a loopback address nothing listens on.
func DeadAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	a := ln.Addr().String()
	_ = ln.Close()
	return a, nil
}
