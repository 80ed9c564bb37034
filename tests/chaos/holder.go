package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
	"github.com/lockservice/lockd/tests/cluster"
)

// holderBinary is cmd/holder ($CHAOS_HOLDER_BIN, or built once per process
// without -race: it is a client process like any other).
func holderBinary() (string, error) {
	if p := os.Getenv("CHAOS_HOLDER_BIN"); p != "" {
		return filepath.Abs(p)
	}
	return cluster.BuildBinary("./tests/chaos/cmd/holder")
}

// holderProc is one run of the holder process.
type holderProc struct {
	name    string
	lock    string
	cmd     *exec.Cmd
	granted chan HolderLine // receives the grant line, once
	done    chan struct{}   // closed when the process has exited

	mu         sync.Mutex
	last       HolderLine
	exit       error
	leaseUntil time.Duration // its last reported local lease end (history clock)
	lostAt     time.Duration // when it reported the lock lost (0: not yet)
}

// lease is the holder's last reported lease end and when it reported the
// loss (0 if not).
func (p *holderProc) lease() (until, lost time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaseUntil, p.lostAt
}

func (p *holderProc) pid() int { return p.cmd.Process.Pid }

func (p *holderProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *holderProc) signal(sig syscall.Signal) error {
	if !p.running() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %v to holder %s (pid %d): %w", sig, p.name, p.pid(), err)
	}
	return nil
}

// kill sends SIGKILL (resuming first is not needed) and waits for the exit.
func (p *holderProc) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("holder %s (pid %d) did not exit 10s after SIGKILL", p.name, p.pid())
	}
}

// HolderTokenEnv names the environment variable that gives the holder
// process its API token (the workloads' tenant's).
const HolderTokenEnv = "CHAOS_HOLDER_TOKEN"

// startHolder starts a holder process on the takeover lock. Its grant is
// recorded like an in-process worker's.
func (e *env) startHolder(bin, resourceURL, logDir, name string) (*holderProc, error) {
	return e.startHolderOn(bin, resourceURL, logDir, name, takeoverLock)
}

// startHolderOn starts a holder process on lock.
func (e *env) startHolderOn(bin, resourceURL, logDir, name, lock string) (*holderProc, error) {
	cmd := exec.Command(bin,
		"-endpoints", strings.Join(e.endpoints, ","),
		"-lock", lock,
		"-resource", resourceURL,
		"-name", name,
		"-prepare", e.cfg.HolderPrepare.String(),
	)
	// The token goes in the environment, not on the command line (ps).
	cmd.Env = append(os.Environ(), HolderTokenEnv+"="+e.tenantToken)
	logf, err := os.OpenFile(filepath.Join(logDir, "holders.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cluster.StartProcess(cmd); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start holder: %w", err)
	}
	p := &holderProc{name: name, lock: lock, cmd: cmd, granted: make(chan HolderLine, 1), done: make(chan struct{})}
	fmt.Fprintf(logf, "=== %s started pid %d at %v\n", name, p.pid(), e.h.Now())
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l HolderLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			fmt.Fprintf(logf, "%s %v %s\n", name, e.h.Now().Round(time.Millisecond), sc.Text())
			p.mu.Lock()
			switch l.Ev {
			case "lease", "safe":
				p.leaseUntil = e.sinceStart(l.Until)
				if l.Until > 0 && l.Until > l.At {
					at := e.sinceStart(l.At)
					e.h.AddClaim(check.LeaseClaim{Worker: name, Session: l.Session, At: at, Until: p.leaseUntil, Source: "holder " + l.Ev})
				}
			case "expired":
				if strings.Contains(l.Err, string(api.CodeSessionExpired)) || strings.Contains(l.Err, string(api.CodeNoSession)) {
					e.h.AddSessionEnd(check.SessionEnd{Worker: name, Session: l.Session, By: e.sinceStart(l.At), How: "holder told: " + l.Err})
				}
			case "lost":
				p.lostAt = e.h.Now()
			default:
				p.last = l
			}
			p.mu.Unlock()
			if l.Ev == "granted" {
				e.holderGranted(name, lock, l)
				p.granted <- l
			}
		}
		err := cmd.Wait()
		fmt.Fprintf(logf, "=== %s pid %d exited at %v: %v\n", name, p.pid(), e.h.Now(), err)
		logf.Close()
		p.mu.Lock()
		p.exit = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// sinceStart converts a Unix-nanosecond time of a holder process to the
// history's clock.
func (e *env) sinceStart(unixNano int64) time.Duration {
	return time.Unix(0, unixNano).Sub(e.h.Start())
}

func (e *env) holderGranted(name, lock string, l HolderLine) {
	at := e.h.Now()
	e.h.AddLockObs(check.LockObs{Lock: lock, Node: l.Node, Mode: api.LockExclusive, Index: l.Index, Held: l.Held, Source: "holder"})
	e.h.Checked("grant-confirmed")
	if !l.Held {
		e.h.AddViolation("grant-confirmed", fmt.Sprintf("holder %s was granted %s but the service says it does not hold (index %d)", name, l.Node, l.Index))
	}
	e.h.AddGrant(check.Grant{Lock: lock, Node: l.Node, Mode: api.LockExclusive, Token: l.Token, Session: l.Session,
		Owner: l.Owner, CreateIndex: l.CreateIndex, Epoch: l.Epoch, Worker: name, At: at})
}

// takeoverWaiter is the in-process client that waits behind the holder
// process: its grant after the holder dies is the takeover.
type takeoverWaiter struct {
	name    string
	arm     chan struct{}      // start a Lock
	release chan struct{}      // unlock
	grants  chan time.Duration // the time of each grant, after its first fenced write
}

func newTakeoverWaiter() *takeoverWaiter {
	return &takeoverWaiter{
		name:    "takeover-waiter",
		arm:     make(chan struct{}, 1),
		release: make(chan struct{}, 1),
		grants:  make(chan time.Duration, 1),
	}
}

func (e *env) runTakeoverWaiter(w *takeoverWaiter) {
	c, err := e.newClient(w.name, true, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	r := e.rng(w.name)
	for i := 0; i < maxIterations; i++ {
		select {
		case <-w.arm:
		case <-e.ctx.Done():
			return
		}
		// The holder may live through many steps before its fault: the
		// wait is bounded by the run, not by a takeover bound (the
		// executor applies that from the fault on).
		ctx, cancel := context.WithTimeout(e.ctx, e.cfg.Duration+10*time.Minute)
		m, s0, err := e.queueTakeover(ctx, c, w.name)
		cancel()
		if err != nil {
			continue
		}
		at := e.h.Now()
		hold := e.newHolding(takeoverLock, m.Node(), w.name, api.LockExclusive)
		hold.live(m.Context(), at)
		e.granted(c, w.name, takeoverLock, api.LockExclusive, m.Node(), m.Token(), s0, r, hold, m.Context)
		select {
		case w.grants <- at:
		default:
		}
		select {
		case <-w.release:
		case <-e.ctx.Done():
		}
		hold.release()
		uctx, ucancel := e.callCtx()
		_ = e.tracedOp(uctx, w.name, "unlock", func(ctx context.Context) error { return m.Unlock(ctx) })
		ucancel()
	}
}

// maxTakeoverTries bounds the waiter's attempts to queue for one
// takeover.
const maxTakeoverTries = 1000

// queueTakeover locks the takeover lock for the waiter, queueing again
// with a new session if its session ends while it waits (checker d
// reports the loss): a waiter that gave up would leave the next takeover
// without one, a second violation for one loss.
func (e *env) queueTakeover(ctx context.Context, c *sdk.Client, name string) (*sdk.Mutex, *sdk.Session, error) {
	err := ctx.Err()
	for try := 0; try < maxTakeoverTries && ctx.Err() == nil; try++ {
		var s0 *sdk.Session
		if s0, err = c.Session(ctx, cellName); err == nil {
			m := c.NewMutex(takeoverLock)
			if err = e.op(name, "lock", func() error { return m.Lock(ctx) }); err == nil {
				return m, s0, nil
			}
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	return nil, nil, err
}

// waitQueued waits until the takeover lock has n lock nodes (the holder's
// and the waiter's).
func waitQueued(ctx context.Context, c *sdk.Client, n int, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for i := 0; i < 100_000; i++ {
		names, _, err := c.Children(ctx, takeoverLock)
		if err == nil {
			k := 0
			for _, nm := range names {
				if strings.HasPrefix(nm, "w-") {
					k++
				}
			}
			if k >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("takeover lock: %d lock nodes not queued within %v", n, bound)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New("takeover lock: not queued")
}
