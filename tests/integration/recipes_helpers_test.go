package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// fanoutMetric is the leader's histogram of watch events delivered per
// committed write (server/lockd/process.go).
const fanoutMetric = "lockd_watch_events_per_write"

// fanout is one scrape of fanoutMetric for one cell, summed over the
// replicas scraped: only the leader observes, so the sum is the cell's
// figure even if leadership moved between scrapes.
type fanout struct {
	count   float64            // writes observed
	sum     float64            // events delivered by them
	buckets map[string]float64 // le → cumulative count
}

// sub is f − g, bucket by bucket.
func (f fanout) sub(g fanout) fanout {
	out := fanout{count: f.count - g.count, sum: f.sum - g.sum, buckets: map[string]float64{}}
	for le, n := range f.buckets {
		out.buckets[le] = n - g.buckets[le]
	}
	return out
}

// over is how many of the writes delivered more than le events (le must
// be one of the histogram's bounds: "0", "1", "2", ...).
func (f fanout) over(le string) float64 { return f.count - f.buckets[le] }

func (f fanout) String() string {
	return fmt.Sprintf("%.0f writes delivered %.0f events (%.0f with 0, %.0f with 1, %.0f with 2, %.0f with more)",
		f.count, f.sum, f.buckets["0"], f.buckets["1"]-f.buckets["0"], f.buckets["2"]-f.buckets["1"], f.over("2"))
}

// scrapeFanout reads fanoutMetric for cell from every replica of c (all
// must be running and unpaused) and sums them.
func scrapeFanout(t testing.TB, c *cluster.Cluster, cell string) fanout {
	t.Helper()
	total := fanout{buckets: map[string]float64{}}
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	for _, id := range c.IDs() {
		resp, err := hc.Get("http://" + c.APIAddr(id) + "/metrics")
		if err != nil {
			t.Fatalf("scrape replica %d: %v", id, err)
		}
		f, err := parseFanout(resp.Body, cell)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("scrape replica %d: %v", id, err)
		}
		total.count += f.count
		total.sum += f.sum
		for le, n := range f.buckets {
			total.buckets[le] += n
		}
	}
	return total
}

// parseFanout picks fanoutMetric's series for cell out of a Prometheus
// text exposition.
func parseFanout(r io.Reader, cell string) (fanout, error) {
	f := fanout{buckets: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	cellLabel := `cell="` + cell + `"`
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, fanoutMetric) || !strings.Contains(line, cellLabel) {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return f, fmt.Errorf("%q: %v", line, err)
		}
		name := line[:strings.IndexByte(line, '{')]
		switch name {
		case fanoutMetric + "_count":
			f.count += v // summed over the cell's prefixes
		case fanoutMetric + "_sum":
			f.sum += v
		case fanoutMetric + "_bucket":
			i := strings.Index(line, `le="`)
			if i < 0 {
				continue
			}
			le := line[i+4:]
			le = le[:strings.IndexByte(le, '"')]
			f.buckets[le] += v
		}
	}
	return f, sc.Err()
}

// lineProc is a child process whose stdout is read line by line: the
// pausedleader worker, lockctl elect or watch. It is killed by PID (its
// process group) when the test ends.
type lineProc struct {
	t     testing.TB
	name  string
	cmd   *exec.Cmd
	lines chan string   // stdout lines, in order; closed at EOF
	done  chan struct{} // closed once the process has exited
	err   error         // exit status, once done
}

// startLineProc starts bin with args in a process group of its own.
func startLineProc(t testing.TB, name, bin string, args ...string) *lineProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	p := &lineProc{t: t, name: name, cmd: cmd, lines: make(chan string, 4096), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if s := stderr.String(); s != "" {
			t.Logf("%s stderr:\n%s", name, s)
		}
	})
	return p
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *lineProc) pid() int { return p.cmd.Process.Pid }

// signal sends sig to the process group, unless the process has exited.
func (p *lineProc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// kill sends SIGKILL to the group (SIGCONT first, so a paused process's
// children are not left stopped) and waits for the exit.
func (p *lineProc) kill() {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Errorf("%s (pid %d) did not exit 10s after SIGKILL", p.name, p.pid())
	}
}

// wait waits up to d for the process to exit and returns its status.
func (p *lineProc) wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("%s (pid %d) still running after %v", p.name, p.pid(), d)
	}
}

// await returns the next line starting with prefix, skipping others, or
// fails the test after d.
func (p *lineProc) await(prefix string, d time.Duration) string {
	p.t.Helper()
	l, err := p.next(prefix, d)
	if err != nil {
		p.t.Fatal(err)
	}
	return l
}

func (p *lineProc) next(prefix string, d time.Duration) (string, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return "", fmt.Errorf("%s exited (%v) before printing %q", p.name, p.wait(time.Second), prefix)
			}
			p.t.Logf("%s: %s", p.name, l)
			if strings.HasPrefix(l, prefix) {
				return l, nil
			}
		case <-timer.C:
			return "", fmt.Errorf("%s printed no %q within %v", p.name, prefix, d)
		}
	}
}

// drain discards the lines printed so far.
func (p *lineProc) drain() {
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return
			}
			p.t.Logf("%s: %s", p.name, l)
		default:
			return
		}
	}
}

// field is the value of key=value in a worker line, "" if absent.
func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// waitChildren waits until path has at least n children.
func waitChildren(tb testing.TB, cl *sdk.Client, path string, n int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if names, _, err := cl.Children(ctx, path); err == nil && len(names) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("%s never had %d children", path, n)
}
