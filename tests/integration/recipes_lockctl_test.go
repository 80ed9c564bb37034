package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// lockctlRun is one finished lockctl invocation.
type lockctlRun struct {
	code           int
	stdout, stderr string
}

// lockctlEnv runs the lockctl binary against one cluster.
type lockctlEnv struct {
	t   *testing.T
	bin string
	eps string
}

func (e *lockctlEnv) args(args ...string) []string {
	return append([]string{"--endpoints", e.eps}, args...)
}

// run runs lockctl to completion (bounded by a minute).
func (e *lockctlEnv) run(args ...string) lockctlRun {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, e.args(args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := lockctlRun{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		e.t.Fatalf("lockctl %v: %v", args, err)
	}
	e.t.Logf("lockctl %s → exit %d, stdout %q, stderr %q", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	return r
}

// start runs lockctl in the background; its stdout is read line by line.
func (e *lockctlEnv) start(name string, args ...string) *lineProc {
	e.t.Helper()
	return startLineProc(e.t, name, e.bin, e.args(args...)...)
}

// errorLine checks that stderr is exactly one line naming code.
func errorLine(t *testing.T, r lockctlRun, code string) {
	t.Helper()
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "lockctl: "+code+": ") {
		t.Fatalf("stderr %q: want one line starting %q", r.stderr, "lockctl: "+code+": ")
	}
}

// stopByPID sends SIGTERM to the lockctl process alone (not its group) and
// waits for it to exit.
func stopByPID(t *testing.T, p *lineProc) error {
	t.Helper()
	must(t, p.cmd.Process.Signal(syscall.SIGTERM))
	return p.wait(30 * time.Second)
}

// TestLockctl drives the lockctl binary (built from ./ctl/cmd/lockctl) as
// a subprocess against a real cluster: lock with LOCK_TOKEN, exit status
// and --timeout; elect and leader; members; watch (one line per event).
func TestLockctl(t *testing.T) {
	t.Parallel()
	bin := cluster.Build(t, "./ctl/cmd/lockctl")
	c := cluster.Start(t, cluster.Options{})
	e := &lockctlEnv{t: t, bin: bin, eps: strings.Join(c.Endpoints(), ",")}
	t.Run("LockGivesToken", func(t *testing.T) { e.t = t; testLockctlLock(t, e) })
	t.Run("LockTimeout", func(t *testing.T) { e.t = t; testLockctlTimeout(t, e, c) })
	t.Run("ElectLeader", func(t *testing.T) { e.t = t; testLockctlElect(t, e) })
	t.Run("Members", func(t *testing.T) { e.t = t; testLockctlMembers(t, e, c) })
	t.Run("Watch", func(t *testing.T) { e.t = t; testLockctlWatch(t, e, c) })
	t.Run("WatchShowsLatest", func(t *testing.T) { e.t = t; testLockctlWatchLatest(t, e, c) })
}

func testLockctlLock(t *testing.T, e *lockctlEnv) {
	r := e.run("lock", "/demo/ctl/lock", "--", "sh", "-c", `echo "$LOCK_TOKEN"`)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	tok, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64)
	if err != nil || api.TokenIndex(tok) == 0 {
		t.Fatalf("LOCK_TOKEN %q is not a fencing token (%v)", r.stdout, err)
	}
	// The next holder's token is higher: the lock was released on exit.
	r2 := e.run("lock", "/demo/ctl/lock", "--", "sh", "-c", `echo "$LOCK_TOKEN"`)
	tok2, err := strconv.ParseUint(strings.TrimSpace(r2.stdout), 10, 64)
	if r2.code != 0 || err != nil || tok2 <= tok {
		t.Fatalf("second holder: exit %d, token %q after %d", r2.code, r2.stdout, tok)
	}
	// COMMAND's exit status is lockctl's, and nothing is printed for it.
	r = e.run("lock", "/demo/ctl/lock", "--", "sh", "-c", "exit 7")
	if r.code != 7 || r.stderr != "" {
		t.Fatalf("COMMAND exit 7: lockctl exit %d, stderr %q", r.code, r.stderr)
	}
	r = e.run("lock", "--shared", "/demo/ctl/lock", "--", "true")
	if r.code != 0 {
		t.Fatalf("shared lock: exit %d", r.code)
	}
}

func testLockctlTimeout(t *testing.T, e *lockctlEnv, c *cluster.Cluster) {
	const path = "/demo/ctl/busy"
	holder := e.start("holder", "lock", path, "--", "sh", "-c", `echo "held $LOCK_TOKEN"; exec sleep 120`)
	holder.await("held ", 30*time.Second)
	start := time.Now()
	r := e.run("lock", path, "--timeout", "500ms", "--", "echo", "must not run")
	if r.code == 0 || strings.Contains(r.stdout, "must not run") {
		t.Fatalf("lock --timeout while held: exit %d, stdout %q", r.code, r.stdout)
	}
	errorLine(t, r, "lock_timeout")
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("--timeout 500ms took %v", d)
	}
	probe := newSDK(t, c, 12*time.Second)
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	if names, _, err := probe.Children(ctx, path); err != nil || len(names) != 1 {
		t.Fatalf("after the timeout the lock has %v (%v), want the holder's node alone", names, err)
	}
	// SIGTERM to lockctl: it stops COMMAND, releases the lock, exits non-zero.
	if err := stopByPID(t, holder); err == nil {
		t.Fatal("interrupted lockctl lock exited 0")
	}
	pollUntil(t, 10*time.Second, "the holder's node to go", func() bool {
		// The lock directory lockctl made is a container: it goes with it.
		_, _, err := probe.Children(ctx, path)
		return errors.Is(err, sdk.ErrNoNode)
	})
	r = e.run("lock", path, "--timeout", "5s", "--", "true")
	if r.code != 0 {
		t.Fatalf("lock after the holder stopped: exit %d", r.code)
	}
}

func testLockctlElect(t *testing.T, e *lockctlEnv) {
	const name = "/demo/ctl/elect"
	r := e.run("leader", name)
	if r.code == 0 {
		t.Fatalf("leader with no candidates: exit 0, stdout %q", r.stdout)
	}
	errorLine(t, r, "no_leader")

	alpha := e.start("elect-alpha", "elect", name, "alpha")
	alpha.await("leading ", 30*time.Second)
	if r := e.run("leader", name); r.code != 0 || r.stdout != "alpha\n" {
		t.Fatalf("leader: exit %d, stdout %q; want alpha", r.code, r.stdout)
	}
	if r := e.run("-o", "json", "leader", name); r.code != 0 || !strings.Contains(r.stdout, `"value": "alpha"`) {
		t.Fatalf("leader -o json: exit %d, stdout %q", r.code, r.stdout)
	}
	beta := e.start("elect-beta", "elect", name, "beta")
	if l, err := beta.next("leading ", 500*time.Millisecond); err == nil {
		t.Fatalf("beta leads beside alpha: %q", l)
	}
	if err := stopByPID(t, alpha); err != nil {
		t.Fatalf("elect after SIGTERM: %v", err)
	}
	beta.await("leading ", 30*time.Second)
	if r := e.run("leader", name); r.code != 0 || r.stdout != "beta\n" {
		t.Fatalf("leader after alpha resigned: exit %d, stdout %q; want beta", r.code, r.stdout)
	}
	if err := stopByPID(t, beta); err != nil {
		t.Fatalf("elect after SIGTERM: %v", err)
	}
	if r := e.run("leader", name); r.code == 0 {
		t.Fatalf("leader after both resigned: exit 0, stdout %q", r.stdout)
	}
}

func testLockctlMembers(t *testing.T, e *lockctlEnv, c *cluster.Cluster) {
	const group = "/demo/ctl/group"
	ctx, cancel := ctxFor(callTimeout)
	defer cancel()
	x, err := newSDK(t, c, 12*time.Second).Join(ctx, group, []byte("x"))
	must(t, err)
	_, err = newSDK(t, c, 12*time.Second).Join(ctx, group, []byte("y"))
	must(t, err)
	r := e.run("members", group)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasSuffix(lines[0], "\tx") || !strings.HasSuffix(lines[1], "\ty") {
		t.Fatalf("members: exit %d, stdout %q; want x then y", r.code, r.stdout)
	}
	must(t, x.Leave(ctx))
	r = e.run("-o", "json", "members", group)
	var ms []struct{ Node, Value string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ms) != nil || len(ms) != 1 || ms[0].Value != "y" {
		t.Fatalf("members -o json after x left: exit %d, stdout %q", r.code, r.stdout)
	}
}

// lockctl watch prints one line per event and re-arms after each. The
// test makes one change at a time and waits for its line. lockctl prints
// a line only after re-arming, with the state it re-armed at: once a
// line shows a change, the watch is armed past it and no older line is
// still to come, so each later change is an event of its own.
func testLockctlWatch(t *testing.T, e *lockctlEnv, c *cluster.Cluster) {
	const path = "/demo/ctl/watched"
	cl := newSDK(t, c, 12*time.Second)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	w := e.start("watch", "-o", "json", "watch", path)

	// The watch arms on a missing node; create it (again, until the watch
	// was armed in time to see a change).
	var first string
	const tries = 50
	for i := 1; first == "" && i <= tries; i++ {
		_, err := cl.Put(ctx, path, []byte(fmt.Sprintf("v%d", i)), sdk.MakeParents())
		must(t, err)
		if l, err := w.next("{", 300*time.Millisecond); err == nil {
			first = l
		}
	}
	if first == "" {
		t.Fatalf("lockctl watch printed nothing for %d changes", tries)
	}
	// A line of an earlier put may still be on its way (one slower than
	// 300 ms): a sentinel's line is the last of them.
	_, err := cl.Put(ctx, path, []byte("armed"))
	must(t, err)
	for i := 0; ; i++ {
		if i > tries {
			t.Fatal("lockctl watch never printed the sentinel's value")
		}
		var ev struct {
			Value string `json:"value"`
		}
		if l := w.await("{", 30*time.Second); json.Unmarshal([]byte(l), &ev) == nil && ev.Value == "armed" {
			break
		}
	}
	type step struct {
		do   func() error
		want api.EventType
	}
	steps := []step{
		{func() error { _, err := cl.Put(ctx, path, []byte("changed")); return err }, api.EventDataChanged},
		{func() error { _, err := cl.Put(ctx, path+"/child", []byte("c")); return err }, api.EventChildrenChanged},
		{func() error { return cl.Delete(ctx, path+"/child") }, api.EventChildrenChanged},
		{func() error { return cl.Delete(ctx, path) }, api.EventDeleted},
	}
	for i, s := range steps {
		must(t, s.do())
		l := w.await("{", 30*time.Second)
		var ev struct {
			Type    api.EventType `json:"type"`
			Path    string        `json:"path"`
			Exists  bool          `json:"exists"`
			Value   string        `json:"value"`
			Version uint64        `json:"version"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("step %d: %q is not JSON: %v", i, l, err)
		}
		if ev.Type != s.want || ev.Path != path {
			t.Fatalf("step %d: event %s on %s, want %s on %s", i, ev.Type, ev.Path, s.want, path)
		}
		if i == 0 && (ev.Value != "changed" || !ev.Exists) {
			t.Fatalf("data change printed %+v", ev)
		}
		if s.want == api.EventDeleted && ev.Exists {
			t.Fatalf("deletion printed as existing: %+v", ev)
		}
	}
	if l, err := w.next("", 500*time.Millisecond); err == nil {
		t.Fatalf("a line with no event behind it: %q", l)
	}
	// Interrupted by PID, it exits 0.
	if err := stopByPID(t, w); err != nil {
		t.Fatalf("watch after SIGTERM: %v", err)
	}
}

// Bursts of changes: lockctl watch may skip intermediate values, but the
// last line it prints always shows the latest state. (It used to re-read
// with a Get before re-arming with GetW, so a change between the two was
// never printed and the output stayed stale: about one burst in five.)
func testLockctlWatchLatest(t *testing.T, e *lockctlEnv, c *cluster.Cluster) {
	const path = "/demo/ctl/burst"
	cl := newSDK(t, c, 12*time.Second)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	_, err := cl.Put(ctx, path, []byte("v0"), sdk.MakeParents())
	must(t, err)
	w := e.start("watch", "-o", "json", "watch", path)
	// Armed once it prints a change (it prints nothing before the first:
	// under load it may start after a fixed sleep's puts).
	for i := 0; ; i++ {
		_, err := cl.Put(ctx, path, []byte(fmt.Sprintf("arm-%d", i)))
		must(t, err)
		if _, err := w.next("{", 500*time.Millisecond); err == nil {
			break
		}
		if i == 40 {
			t.Fatal("lockctl watch printed no change within 20 s of puts")
		}
	}
	for burst := 0; burst < 6; burst++ {
		var last uint64
		for i := 0; i < 10; i++ {
			n, err := cl.Put(ctx, path, []byte(fmt.Sprintf("b%d-%d", burst, i)))
			must(t, err)
			last = n.Version
		}
		var printed uint64
		for printed != last {
			l, err := w.next("{", 5*time.Second)
			if err != nil {
				t.Fatalf("burst %d: the last line shows version %d, the node is at %d: %v", burst, printed, last, err)
			}
			var ev struct{ Version uint64 }
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			printed = ev.Version
		}
	}
	if err := stopByPID(t, w); err != nil {
		t.Fatalf("watch after SIGTERM: %v", err)
	}
}
