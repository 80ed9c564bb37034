//go:build !windows

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/sdk/fence"
)

// A worker prints one line per step on stdout, "STEP key=value ...", which
// the coordinator (and the integration tests) read:
//
//	waiting  name=A                      before Lock
//	holding  name=A token=T node=N       granted
//	fenced   name=A token=T status=200   its first act: a fenced write that raises the mark
//	prepared name=A seq=K token=T        a write is ready; it is sent after --work
//	wrote    name=A seq=K token=T status=200
//	refused  name=A seq=K token=T status=409   the resource refused a stale token: stop
//	stopped  name=A reason=...           the lock's Context ended before a write was prepared
//	session  name=A event=jeopardy|safe|expired|failover
//	released name=A                      unlocked after SIGTERM
//	error    name=A err=...
//
// The worker checks Context before it prepares each write, as a well-behaved
// holder does, but not again before it sends it: a pause (GC, SIGSTOP) can
// fall between the two, and only the fenced resource can stop that write.
type worker struct {
	name     string
	resource string
	out      io.Writer
	mu       sync.Mutex // serialises lines
	http     *http.Client
}

func (w *worker) say(step string, kv ...any) {
	var b strings.Builder
	b.WriteString(step)
	fmt.Fprintf(&b, " name=%s", w.name)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kv[i], kv[i+1])
	}
	w.mu.Lock()
	fmt.Fprintln(w.out, b.String())
	w.mu.Unlock()
}

// write sends one fenced write to the resource and returns the HTTP status.
func (w *worker) write(ctx context.Context, token uint64, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.resource, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	fence.SetToken(req, token)
	resp, err := w.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func workerMain(ctx context.Context, args []string) int {
	var o options
	fs := flag.NewFlagSet("pausedleader worker", flag.ContinueOnError)
	o.register(fs)
	w := &worker{out: os.Stdout, http: &http.Client{Timeout: 10 * time.Second}}
	fs.StringVar(&w.name, "name", "worker", "name printed on every line and sent with every write")
	fs.StringVar(&w.resource, "resource", "", "URL of the fenced resource's write endpoint")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if w.resource == "" {
		return fail("worker: --resource is required")
	}
	if err := w.run(ctx, o); err != nil {
		w.say("error", "err", strings.ReplaceAll(err.Error(), " ", "_"))
		return 1
	}
	return 0
}

// run is one worker's life: take the lock, fence first, then prepare and
// send writes until the lock's Context ends, the resource refuses a write,
// or the worker is stopped (it unlocks on the way out).
func (w *worker) run(ctx context.Context, o options) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := sdk.New(cctx, sdk.Config{Endpoints: o.endpointList(), Lease: o.lease})
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()

	m := c.NewMutex(o.lock)
	w.say("waiting")
	if err := m.Lock(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting
		}
		return err
	}
	token, node := m.Token(), m.Node()
	w.say("holding", "token", token, "node", node)
	w.reportSession(ctx, c, o.lock)

	// The new holder's first act: a fenced write that raises the resource's
	// mark before it reads any state, so nothing an older holder sends can
	// land afterwards.
	if err := w.fenceFirst(ctx, token); err != nil {
		return err
	}

	defer w.release(m)
	return w.writeLoop(ctx, m, token, o.work)
}

// reportSession prints the events of the session that holds lock.
func (w *worker) reportSession(ctx context.Context, c *sdk.Client, lock string) {
	if cell, err := c.CellFor(lock); err == nil {
		if s, err := c.Session(ctx, cell); err == nil {
			go func() {
				for ev := range s.Events() {
					w.say("session", "event", ev.Type)
				}
			}()
		}
	}
}

// fenceFirst sends the fencing write, which must be accepted.
func (w *worker) fenceFirst(ctx context.Context, token uint64) error {
	status, err := w.write(ctx, token, w.name+" claims")
	if err != nil {
		return err
	}
	w.say("fenced", "token", token, "status", status)
	if status != http.StatusOK {
		return fmt.Errorf("fencing write refused with HTTP %d", status)
	}
	return nil
}

// release unlocks, even if the worker's context has ended.
func (w *worker) release(m *sdk.Mutex) {
	uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Unlock(uctx); err == nil {
		w.say("released")
	}
}

// writeLoop checks the lock's Context, prepares a write, works on it for
// work, and sends it, over and over.
func (w *worker) writeLoop(ctx context.Context, m *sdk.Mutex, token uint64, work time.Duration) error {
	for seq := 1; seq < 1_000_000; seq++ {
		if err := m.Context().Err(); err != nil {
			w.say("stopped", "reason", "lock_context_done")
			return nil
		}
		w.say("prepared", "seq", seq, "token", token)
		select {
		case <-time.After(work):
		case <-ctx.Done():
			return nil
		}
		// No check here: this is the write a pause can delay past the lease.
		status, err := w.write(ctx, token, fmt.Sprintf("%s seq %d", w.name, seq))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if status == http.StatusConflict {
			w.say("refused", "seq", seq, "token", token, "status", status)
			return nil
		}
		if status != http.StatusOK {
			return fmt.Errorf("write %d: HTTP %d", seq, status)
		}
		w.say("wrote", "seq", seq, "token", token, "status", status)
	}
	return errors.New("too many writes")
}
