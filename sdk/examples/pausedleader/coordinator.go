//go:build !windows

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/sdk/fence"
)

// resource is the protected resource: an in-memory log of accepted writes
// behind fence.Middleware, which refuses (409) any token below the
// highest it has accepted for the lock.
type resource struct {
	lock  string
	fence *fence.Fence
	reg   *prometheus.Registry // holds the fence's rejection counter

	mu       sync.Mutex
	accepted []string // "token body", in order
}

func newResource(lock string) *resource {
	rejected := fence.NewRejectionCounter()
	reg := prometheus.NewRegistry()
	reg.MustRegister(rejected)
	return &resource{lock: lock, fence: fence.New(rejected), reg: reg}
}

func (r *resource) handler() http.Handler {
	mux := http.NewServeMux()
	write := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<16))
		token, _ := fence.TokenFrom(req)
		r.mu.Lock()
		r.accepted = append(r.accepted, fmt.Sprintf("%d %s", token, body))
		r.mu.Unlock()
		fmt.Fprintln(w, "ok")
	})
	// Every write is to the one lock's data: its mark is per lock path.
	mux.Handle("POST /write", fence.Middleware(r.fence, func(*http.Request) string { return r.lock }, write))
	mux.Handle("GET /metrics", promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{}))
	return mux
}

// rejections is the fence's rejection counter for the lock, as /metrics
// reports it.
func (r *resource) rejections() float64 {
	mfs, err := r.reg.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != fence.RejectionsMetric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "lock" && l.GetValue() == r.lock {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// line is one parsed worker line: "step k=v k=v".
type line struct {
	step string
	kv   map[string]string
	raw  string
}

func parseLine(s string) line {
	f := strings.Fields(s)
	l := line{kv: map[string]string{}, raw: s}
	if len(f) == 0 {
		return l
	}
	l.step = f[0]
	for _, p := range f[1:] {
		if k, v, ok := strings.Cut(p, "="); ok {
			l.kv[k] = v
		}
	}
	return l
}

// proc is a worker process started by the coordinator.
type proc struct {
	name  string
	cmd   *exec.Cmd
	lines chan line     // every stdout line, in order; closed at EOF
	done  chan struct{} // closed when the process has exited
	err   error         // its exit status, once done
}

func startWorker(name string, o options, resourceURL string) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "worker", "--name", name, "--endpoints", o.endpoints, "--lock", o.lock,
		"--lease", o.lease.String(), "--work", o.work.String(), "--resource", resourceURL)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, lines: make(chan line, 1024), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Printf("  [%s] %s\n", name, sc.Text())
			p.lines <- parseLine(sc.Text())
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// await returns the worker's next line with step, skipping others, within d.
func (p *proc) await(step string, d time.Duration) (line, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return line{}, fmt.Errorf("worker %s exited before %q", p.name, step)
			}
			if l.step == "error" {
				return l, fmt.Errorf("worker %s: %s", p.name, l.raw)
			}
			if l.step == step {
				return l, nil
			}
		case <-timer.C:
			return line{}, fmt.Errorf("worker %s: no %q within %v", p.name, step, d)
		}
	}
}

// drain discards the lines received so far, so the next await sees only
// what the worker prints from now on.
func (p *proc) drain() {
	for {
		select {
		case _, ok := <-p.lines:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// signal sends sig to the worker by PID (nothing if it has exited).
func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// stop ends the worker: SIGTERM, then SIGKILL after d.
func (p *proc) stop(d time.Duration) {
	p.signal(syscall.SIGCONT) // a paused process cannot handle SIGTERM
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(d):
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

func coordinatorMain(ctx context.Context, args []string) int {
	var o options
	fs := flag.NewFlagSet("pausedleader", flag.ContinueOnError)
	o.register(fs)
	timeout := fs.Duration("timeout", 2*time.Minute, "give up if the scenario has not played out by then")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := coordinate(ctx, o); err != nil {
		return fail("%v", err)
	}
	fmt.Println("OK: the paused holder's late write was refused by the fenced resource")
	return 0
}

// coordinate plays the story of README.md, step by step; any step that
// does not happen within a bound (a few leases) is an error.
func coordinate(ctx context.Context, o options) error {
	res, url, closeRes, err := serveResource(o.lock)
	if err != nil {
		return err
	}
	defer closeRes()
	c, err := connect(ctx, o)
	if err != nil {
		return err
	}
	defer c.Close()
	// Bound every wait by the lease: registration and takeover need about
	// one lease each.
	step := 10*time.Second + 3*o.lease + 2*o.work

	// 1. A takes the lock, fences, and writes.
	a, err := startWorker("A", o, url)
	if err != nil {
		return err
	}
	defer a.stop(10 * time.Second)
	holdA, err := awaitWriting(a, step)
	if err != nil {
		return err
	}

	// 2. B queues behind A.
	b, err := startWorker("B", o, url)
	if err != nil {
		return err
	}
	defer b.stop(10 * time.Second)
	if err := waitQueued(ctx, c, o.lock, 2, step); err != nil {
		return err
	}
	fmt.Printf("queue: A holds %s, B waits behind it\n", holdA.kv["node"])

	// 3. A is paused right after it has prepared a write.
	prep, paused, err := pauseAfterPrepare(a, o, step)
	if err != nil {
		return err
	}

	// 4. B takes over with a higher token and fences first.
	tokA, tokB, err := awaitTakeover(b, holdA, paused, o, step)
	if err != nil {
		return err
	}

	// 5. A resumes: the write it prepared before the pause is refused.
	if err := resumeRefused(a, res, prep, tokA, tokB, o, step); err != nil {
		return err
	}

	// 6. A stops, B is stopped, and both exit cleanly.
	return awaitExits(a, b, step)
}

// serveResource serves the protected resource on loopback; url is its
// write endpoint, and stop closes it.
func serveResource(lock string) (res *resource, url string, stop func() error, err error) {
	res = newResource(lock)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	srv := &http.Server{Handler: res.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	url = "http://" + ln.Addr().String() + "/write"
	fmt.Printf("resource: fenced writes at %s, mark kept per lock %s\n", url, lock)
	return res, url, srv.Close, nil
}

// connect connects the coordinator's own client, which watches the lock's
// queue, and makes sure no other run holds the lock.
func connect(ctx context.Context, o options) (*sdk.Client, error) {
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := sdk.New(cctx, sdk.Config{Endpoints: o.endpointList()})
	ccancel()
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", o.endpoints, err)
	}
	if n, _, err := c.Children(ctx, o.lock); err == nil && len(n) > 0 {
		c.Close()
		return nil, fmt.Errorf("%s already has %d lock nodes: is another run in progress?", o.lock, len(n))
	}
	return c, nil
}

// awaitWriting waits until the worker holds the lock and has written once;
// it returns its holding line.
func awaitWriting(p *proc, step time.Duration) (line, error) {
	hold, err := p.await("holding", step)
	if err != nil {
		return line{}, err
	}
	if _, err := p.await("wrote", step); err != nil {
		return line{}, err
	}
	return hold, nil
}

// pauseAfterPrepare pauses A right after it has prepared a write: the
// write goes out, with A's old token, when A resumes. It returns the
// prepared line and when A was paused.
func pauseAfterPrepare(a *proc, o options, step time.Duration) (line, time.Time, error) {
	a.drain()
	prep, err := a.await("prepared", step)
	if err != nil {
		return line{}, time.Time{}, err
	}
	a.signal(syscall.SIGSTOP)
	paused := time.Now()
	fmt.Printf("paused A (pid %d, SIGSTOP) holding write seq=%s with token %s; its lease is %v\n",
		a.cmd.Process.Pid, prep.kv["seq"], prep.kv["token"], o.lease)
	return prep, paused, nil
}

// awaitTakeover waits until B holds the lock and its fencing write is
// accepted, and checks B's token is above A's; it returns both tokens.
func awaitTakeover(b *proc, holdA line, paused time.Time, o options, step time.Duration) (tokA, tokB uint64, err error) {
	holdB, err := b.await("holding", step)
	if err != nil {
		return 0, 0, err
	}
	took := time.Since(paused)
	fenced, err := b.await("fenced", step)
	if err != nil {
		return 0, 0, err
	}
	if fenced.kv["status"] != "200" {
		return 0, 0, fmt.Errorf("fencing write by B: %s", fenced.raw)
	}
	tokA, _ = strconv.ParseUint(holdA.kv["token"], 10, 64)
	tokB, _ = strconv.ParseUint(holdB.kv["token"], 10, 64)
	fmt.Printf("takeover: B holds %v after A was paused (lease %v), token %d > A's %d; B fenced first\n",
		took.Round(time.Millisecond), o.lease, tokB, tokA)
	if tokB <= tokA {
		return 0, 0, fmt.Errorf("token of B %d is not above token of A %d", tokB, tokA)
	}
	return tokA, tokB, nil
}

// resumeRefused resumes A and checks the resource refused the write A
// prepared before the pause: the mark is B's token, one rejection counted.
func resumeRefused(a *proc, res *resource, prep line, tokA, tokB uint64, o options, step time.Duration) error {
	a.signal(syscall.SIGCONT)
	fmt.Println("resumed A (SIGCONT): it sends the write it prepared before the pause")
	refused, err := a.await("refused", step)
	if err != nil {
		return err
	}
	if refused.kv["seq"] != prep.kv["seq"] || refused.kv["token"] != prep.kv["token"] {
		return fmt.Errorf("refused write of A %q is not the one it prepared before the pause (%q)", refused.raw, prep.raw)
	}
	if h := res.fence.Highest(o.lock); h != tokB {
		return fmt.Errorf("resource mark %d, want B's token %d", h, tokB)
	}
	if n := res.rejections(); n != 1 {
		return fmt.Errorf("%v rejections counted, want 1", n)
	}
	fmt.Printf("resource: A's write seq=%s with token %d refused (409); mark is B's token %d; %s{lock=%q} = 1\n",
		refused.kv["seq"], tokA, tokB, fence.RejectionsMetric, o.lock)
	return nil
}

// awaitExits waits for A to exit on its own, stops B, and reports either
// one's failure.
func awaitExits(a, b *proc, step time.Duration) error {
	select {
	case <-a.done:
	case <-time.After(step):
		return errors.New("holder A did not exit after its write was refused")
	}
	b.stop(10 * time.Second)
	if b.err != nil {
		return fmt.Errorf("worker B: %v", b.err)
	}
	if a.err != nil {
		return fmt.Errorf("worker A: %v", a.err)
	}
	return nil
}

// waitQueued waits until the lock has n nodes (holder and waiters).
func waitQueued(ctx context.Context, c *sdk.Client, lock string, n int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for ctx.Err() == nil {
		if names, _, err := c.Children(ctx, lock); err == nil && len(names) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s never had %d nodes", lock, n)
}
