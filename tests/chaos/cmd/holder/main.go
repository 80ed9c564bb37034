// Command holder is the chaos suite's lock holder in a process of its own,
// so that the suite can SIGSTOP it past its lease or kill -9 it, as a real
// client dies or stalls. It takes one exclusive lock through the SDK,
// reports the grant (with the service's view of its node) as a JSON line on
// stdout, and then writes to the protected resource with its fencing token
// every -prepare interval, for as long as the lock's Context is live. Each
// write is prepared (the token read, the context checked) and sent one
// interval later: a pause that lands in between sends a write that was
// prepared before the pause, and the resource must refuse it once the next
// holder has written. It exits 0 after SIGTERM (unlocking first), 3 when
// the lock is lost, 1 on error.
//
// Lines: {"ev":"granted",...}, {"ev":"write","token":T,"status":204|409},
// {"ev":"lost"}, {"ev":"error","err":...}; and for the session checker
// (m3): {"ev":"lease","until":U,"at":A,"session":S} each loop (its local
// lease end, Unix ns), {"ev":"safe",...} on SessionSafe and
// {"ev":"expired","err":...} when the cell ends the session.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/sdk/fence"
	"github.com/lockservice/lockd/tests/chaos"
)

func main() {
	f := parseFlags()
	out := &lineWriter{enc: json.NewEncoder(os.Stdout)}
	ctx, cancel := context.WithTimeout(context.Background(), f.maxLife)
	defer cancel()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	h := &holder{holderFlags: f, out: out, term: term}
	h.connect(ctx)
	h.acquire(ctx, cancel)
	h.reportGrant(ctx)
	h.writeLoop(ctx)
}

// holderFlags are the command line's.
type holderFlags struct {
	endpoints, lock, resource, name string
	prepare, maxLife                time.Duration
}

// parseFlags reads the command line.
func parseFlags() holderFlags {
	var (
		endpoints = flag.String("endpoints", "", "comma-separated lockd API addresses")
		lock      = flag.String("lock", "", "lock path")
		resource  = flag.String("resource", "", "protected resource base URL")
		name      = flag.String("name", "holder", "writer name")
		prepare   = flag.Duration("prepare", 100*time.Millisecond, "time between preparing a write and sending it")
		maxLife   = flag.Duration("max", 2*time.Hour, "exit after this long in any case")
	)
	flag.Parse()
	return holderFlags{endpoints: *endpoints, lock: *lock, resource: *resource, name: *name, prepare: *prepare, maxLife: *maxLife}
}

// holder is the one holder: its client, session and lock, and where its
// lines go.
type holder struct {
	holderFlags
	out  *lineWriter
	term chan os.Signal
	c    *sdk.Client
	s    *sdk.Session
	m    *sdk.Mutex
}

// fail reports err and exits 1.
func (h *holder) fail(err error) {
	_ = h.out.Encode(chaos.HolderLine{Ev: "error", Err: err.Error()})
	os.Exit(1)
}

// connect opens the client and its session on the lock's cell, and
// starts watching the session.
func (h *holder) connect(ctx context.Context) {
	c, err := sdk.New(ctx, sdk.Config{Endpoints: strings.Split(h.endpoints, ","), AuthToken: os.Getenv(chaos.HolderTokenEnv)})
	if err != nil {
		h.fail(err)
	}
	h.c = c
	cell, err := c.CellFor(h.lock)
	if err != nil {
		h.fail(err)
	}
	s, err := c.Session(ctx, cell)
	if err != nil {
		h.fail(err)
	}
	h.s = s
	go watchSession(s, h.out)
}

// acquire takes the lock; a signal while it waits cancels the wait and the
// run (cancel).
func (h *holder) acquire(ctx context.Context, cancel context.CancelFunc) {
	h.m = h.c.NewMutex(h.lock)
	lockCtx, lockCancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-h.term:
			lockCancel()
			cancel()
		case <-lockCtx.Done():
		}
	}()
	if err := h.m.Lock(lockCtx); err != nil {
		h.fail(fmt.Errorf("lock: %w", err))
	}
	lockCancel()
}

// reportGrant reports the grant with the service's view of its node.
func (h *holder) reportGrant(ctx context.Context) {
	c, m := h.c, h.m
	node, token := m.Node(), m.Token()
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	n, err := c.Get(rctx, node)
	if err != nil {
		rcancel()
		h.fail(fmt.Errorf("get %s: %w", node, err))
	}
	st, _, err := c.LockState(rctx, node, false)
	rcancel()
	if err != nil {
		h.fail(fmt.Errorf("lock state %s: %w", node, err))
	}
	epoch := uint64(1)
	if pi, ok := c.Directory().Prefix(api.Prefix(h.lock)); ok {
		epoch = pi.Epoch
	}
	_ = h.out.Encode(chaos.HolderLine{Ev: "granted", Node: node, Token: token, Session: h.s.ID(), Owner: n.Owner,
		CreateIndex: n.CreateIndex, Epoch: epoch, Index: st.Index, Held: st.Held && st.Exists, PID: os.Getpid()})
}

// writeLoop writes under the lock for as long as it is held: it exits on
// a signal (unlocking first), at the end of ctx, or when the lock is lost.
func (h *holder) writeLoop(ctx context.Context) {
	hc := &http.Client{Timeout: 5 * time.Second}
	for {
		h.exitIfAsked(ctx)
		if !h.m.Held() {
			_ = h.out.Encode(chaos.HolderLine{Ev: "lost"})
			_ = h.c.Close()
			os.Exit(3)
		}
		_ = h.out.Encode(chaos.HolderLine{Ev: "lease", Session: h.s.ID(), Until: h.s.LocalExpiry().UnixNano(), At: time.Now().UnixNano()})
		if h.m.Context().Err() != nil { // in jeopardy: do not act
			time.Sleep(h.prepare / 2)
			continue
		}
		h.preparedWrite(hc)
	}
}

// exitIfAsked exits 0 after a signal (unlocking first) or at the end of
// ctx.
func (h *holder) exitIfAsked(ctx context.Context) {
	select {
	case <-h.term:
		uctx, ucancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = h.m.Unlock(uctx)
		ucancel()
		_ = h.c.Close()
		_ = h.out.Encode(chaos.HolderLine{Ev: "exit"})
		os.Exit(0)
	case <-ctx.Done():
		_ = h.c.Close()
		os.Exit(0)
	default:
	}
}

// preparedWrite reads the token, waits the prepare interval, then sends
// the write with it and reports the resource's answer.
func (h *holder) preparedWrite(hc *http.Client) {
	tok := h.m.Token() // prepared
	time.Sleep(h.prepare)
	req, _ := http.NewRequest(http.MethodPost, h.resource+"/write?lock="+h.lock, nil)
	fence.SetToken(req, tok)
	req.Header.Set(chaos.HeaderSession, strconv.FormatUint(h.s.ID(), 10))
	req.Header.Set(chaos.HeaderWriter, h.name)
	resp, err := hc.Do(req)
	if err != nil {
		return
	}
	resp.Body.Close()
	_ = h.out.Encode(chaos.HolderLine{Ev: "write", Token: tok, Status: resp.StatusCode})
}

// lineWriter serializes the JSON lines of the main loop and the session
// watcher.
type lineWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *lineWriter) Encode(l chaos.HolderLine) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.enc.Encode(l)
}

// watchSession reports SessionSafe (with the local lease it implies) and
// the cell ending the session.
func watchSession(s *sdk.Session, out *lineWriter) {
	for ev := range s.Events() {
		switch ev.Type {
		case sdk.SessionSafe:
			_ = out.Encode(chaos.HolderLine{Ev: "safe", Session: s.ID(), Until: s.LocalExpiry().UnixNano(), At: time.Now().UnixNano()})
		case sdk.SessionExpired:
			_ = out.Encode(chaos.HolderLine{Ev: "expired", Session: s.ID(), Err: fmt.Sprint(ev.Err), At: time.Now().UnixNano()})
		}
	}
}
