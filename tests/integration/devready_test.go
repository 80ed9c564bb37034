//go:build linux

package integration_test

import (
	"bufio"
	"strings"
	"syscall"
	"testing"
	"time"

	"os/exec"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestDevSaysReadyAndStopsProxiesFirst: `make run`'s cluster prints one
// "ready" line once every cell it promises (cell3, created through the
// directory, included) serves and its proxy answers; Ctrl-C then stops
// the proxy before the lockds, so the proxy does not log giving up on
// them (issue 24, item 10).
func TestDevSaysReadyAndStopsProxiesFirst(t *testing.T) {
	t.Parallel()
	bin := cluster.Build(t, cluster.LockdPkg, versionFlags...)
	cmd := exec.Command(bin, devArgs(t, 3, freePortRun(t, 6), freePortRun(t, 6))...)
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = cmd.Stdout
	must(t, cmd.Start())
	exited := make(chan error, 1)
	lines := make(chan string, 4096)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // the test reads them all; never block the child
			}
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	var all []string
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) // its lockds and proxy die with it
		if t.Failed() {
			t.Logf("output:\n%s", strings.Join(all, "\n"))
		}
	})
	deadline := time.After(2 * time.Minute)
	var ready string
	for ready == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("dev exited before it was ready")
			}
			all = append(all, l)
			if strings.HasPrefix(l, "ready:") {
				ready = l
			}
		case <-deadline:
			t.Fatal("no ready line in 2 minutes")
		}
	}
	for _, want := range []string{"/demo", "/payments", "/cell3", "1 proxies answer"} {
		if !strings.Contains(ready, want) {
			t.Fatalf("ready line %q lacks %q", ready, want)
		}
	}
	// A client session through the proxy, so that the proxy has calls to
	// the lockds in flight (KeepAlive batches) as it is stopped.
	var proxyAddr string
	for _, l := range all {
		if rest, ok := strings.CutPrefix(l, "proxies: "); ok {
			proxyAddr = strings.Fields(rest)[0]
		}
	}
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	cl, err := sdk.New(ctx, sdk.Config{Endpoints: []string{proxyAddr}})
	must(t, err)
	defer cl.Close()
	if _, err := cl.Session(ctx, "demo"); err != nil {
		t.Fatalf("session through the proxy %s: %v", proxyAddr, err)
	}
	must(t, cmd.Process.Signal(syscall.SIGINT))
	stopAt := len(all)
	stop := time.After(time.Minute)
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				done = true
				break
			}
			all = append(all, l)
		case <-stop:
			t.Fatal("dev did not stop within a minute of SIGINT")
		}
	}
	if err := <-exited; err != nil {
		t.Fatalf("dev exited: %v", err)
	}
	// dev says the proxy exited before any lockd starts stopping (a lockd
	// hands off its leaderships first, then stops).
	proxyStop, lockdStop := -1, -1
	for i, l := range all[stopAt:] {
		switch {
		case proxyStop < 0 && l == "1 of 1 proxies stopped; stopping the lockds":
			proxyStop = i
		case lockdStop < 0 && strings.HasPrefix(l, "[replica-") && (strings.Contains(l, "handed off") || strings.Contains(l, "stopped")):
			lockdStop = i
		}
	}
	if proxyStop < 0 || (lockdStop >= 0 && lockdStop < proxyStop) {
		t.Fatalf("the proxy stopped at line %d of the way down, a lockd at line %d: want the proxy first", proxyStop, lockdStop)
	}
	for _, l := range all {
		if strings.Contains(l, "gave up after") {
			t.Fatalf("on the way down: %s", l)
		}
	}
}
