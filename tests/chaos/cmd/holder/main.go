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
	var (
		endpoints = flag.String("endpoints", "", "comma-separated lockd API addresses")
		lock      = flag.String("lock", "", "lock path")
		resource  = flag.String("resource", "", "protected resource base URL")
		name      = flag.String("name", "holder", "writer name")
		prepare   = flag.Duration("prepare", 100*time.Millisecond, "time between preparing a write and sending it")
		maxLife   = flag.Duration("max", 2*time.Hour, "exit after this long in any case")
	)
	flag.Parse()
	out := &lineWriter{enc: json.NewEncoder(os.Stdout)}
	fail := func(err error) {
		_ = out.Encode(chaos.HolderLine{Ev: "error", Err: err.Error()})
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *maxLife)
	defer cancel()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)

	c, err := sdk.New(ctx, sdk.Config{Endpoints: strings.Split(*endpoints, ","), AuthToken: os.Getenv(chaos.HolderTokenEnv)})
	if err != nil {
		fail(err)
	}
	cell, err := c.CellFor(*lock)
	if err != nil {
		fail(err)
	}
	s, err := c.Session(ctx, cell)
	if err != nil {
		fail(err)
	}
	go watchSession(s, out)
	m := c.NewMutex(*lock)
	lockCtx, lockCancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-term:
			lockCancel()
			cancel()
		case <-lockCtx.Done():
		}
	}()
	if err := m.Lock(lockCtx); err != nil {
		fail(fmt.Errorf("lock: %w", err))
	}
	lockCancel()
	node, token := m.Node(), m.Token()
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	n, err := c.Get(rctx, node)
	if err != nil {
		rcancel()
		fail(fmt.Errorf("get %s: %w", node, err))
	}
	st, _, err := c.LockState(rctx, node, false)
	rcancel()
	if err != nil {
		fail(fmt.Errorf("lock state %s: %w", node, err))
	}
	epoch := uint64(1)
	if pi, ok := c.Directory().Prefix(api.Prefix(*lock)); ok {
		epoch = pi.Epoch
	}
	_ = out.Encode(chaos.HolderLine{Ev: "granted", Node: node, Token: token, Session: s.ID(), Owner: n.Owner,
		CreateIndex: n.CreateIndex, Epoch: epoch, Index: st.Index, Held: st.Held && st.Exists, PID: os.Getpid()})

	hc := &http.Client{Timeout: 5 * time.Second}
	for i := 0; ; i++ {
		select {
		case <-term:
			uctx, ucancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = m.Unlock(uctx)
			ucancel()
			_ = c.Close()
			_ = out.Encode(chaos.HolderLine{Ev: "exit"})
			os.Exit(0)
		case <-ctx.Done():
			_ = c.Close()
			os.Exit(0)
		default:
		}
		if !m.Held() {
			_ = out.Encode(chaos.HolderLine{Ev: "lost"})
			_ = c.Close()
			os.Exit(3)
		}
		_ = out.Encode(chaos.HolderLine{Ev: "lease", Session: s.ID(), Until: s.LocalExpiry().UnixNano(), At: time.Now().UnixNano()})
		if m.Context().Err() != nil { // in jeopardy: do not act
			time.Sleep(*prepare / 2)
			continue
		}
		tok := m.Token() // prepared
		time.Sleep(*prepare)
		req, _ := http.NewRequest(http.MethodPost, *resource+"/write?lock="+*lock, nil)
		fence.SetToken(req, tok)
		req.Header.Set(chaos.HeaderSession, strconv.FormatUint(s.ID(), 10))
		req.Header.Set(chaos.HeaderWriter, *name)
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		resp.Body.Close()
		_ = out.Encode(chaos.HolderLine{Ev: "write", Token: tok, Status: resp.StatusCode})
	}
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
