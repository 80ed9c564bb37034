//go:build linux

package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// The lockd command itself: `lockd dev` supervises its replicas (they die
// with it, even on kill -9), a port already taken is a one-line error, and
// `lockd version` and /v1/status report the version linked in by -X.

const testVersion = "v0.0.0-proctest"

// versionFlags link testVersion in, as the Makefile links `git describe`.
var versionFlags = []string{"-ldflags", "-X github.com/lockservice/lockd/server/lockd.Version=" + testVersion}

func TestLockdVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"default", nil, "lockd dev"},
		{"ldflags", versionFlags, "lockd " + testVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := cluster.Build(t, cluster.LockdPkg, tc.flags...)
			out, err := runBounded(t, 30*time.Second, bin, "version")
			if err != nil {
				t.Fatalf("lockd version: %v\n%s", err, out)
			}
			if got := strings.TrimSpace(out); got != tc.want {
				t.Fatalf("lockd version printed %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDevReplicasDieWithSupervisor kill -9s `lockd dev` (and, as `make
// run` is, the process that started it) and checks that every replica and
// proxy it started exits, by PID, within a bounded wait.
func TestDevReplicasDieWithSupervisor(t *testing.T) {
	t.Parallel()
	bin := cluster.Build(t, cluster.LockdPkg, versionFlags...)
	for _, tc := range []struct {
		name string
		// viaShell starts dev under sh, which stays its parent (as make
		// is for `make run`), and kills sh rather than dev.
		viaShell bool
	}{
		{"kill dev", false},
		{"kill dev's parent", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const replicas = 3
			apiBase, raftBase := freePortRun(t, replicas), freePortRun(t, replicas)
			args := devArgs(t, replicas, apiBase, raftBase)
			var top *exec.Cmd
			if tc.viaShell {
				// Not `exec`: the shell stays dev's parent.
				top = exec.Command("sh", "-c", `"$0" "$@"; exit $?`, bin)
				top.Args = append(top.Args, args...)
			} else {
				top = exec.Command(bin, args...)
			}
			var out bytes.Buffer
			w := &lockedWriter{w: &out} // one writer: exec then copies both streams through one pipe
			top.Stdout, top.Stderr = w, w
			// Survivors (the bug this test is for) keep the output pipe
			// open; Wait must not wait for them.
			top.WaitDelay = 5 * time.Second
			must(t, top.Start())
			waited := make(chan struct{})
			go func() { _ = top.Wait(); close(waited) }()

			// Every process of the tree, found by parent PID, is killed by
			// its PID when the test ends, whatever happened.
			var tree []procID
			t.Cleanup(func() {
				for _, p := range append([]procID{{pid: top.Process.Pid}}, tree...) {
					if p.alive() {
						_ = syscall.Kill(p.pid, syscall.SIGKILL)
					}
				}
				<-waited
				if t.Failed() {
					t.Logf("output:\n%s", out.String())
				}
			})

			dev := procID{pid: top.Process.Pid}
			if tc.viaShell {
				kids := waitChildProcs(t, top.Process.Pid, 1, "dev")
				tree = append(tree, kids...)
				dev = kids[0]
			}
			serves := waitChildProcs(t, dev.pid, replicas, "serve")
			tree = append(tree, serves...)
			tree = append(tree, waitChildProcs(t, dev.pid, 1, "--name")...) // the proxy
			for i := 0; i < replicas; i++ {
				addr := fmt.Sprintf("127.0.0.1:%d", apiBase+i)
				st := waitStatus(t, addr, 60*time.Second)
				if st.Version != testVersion {
					t.Errorf("replica at %s reports version %q in /v1/status, want %q", addr, st.Version, testVersion)
				}
			}

			t.Logf("kill -9 %d (%s); replicas %v", top.Process.Pid, tc.name, serves)
			must(t, top.Process.Kill())
			<-waited
			deadline := time.Now().Add(30 * time.Second)
			for _, p := range tree {
				for p.alive() && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if p.alive() {
					t.Errorf("pid %d (%s) still running 30s after its supervisor's kill -9", p.pid, p.cmdline())
				}
			}
		})
	}
}

// TestPortInUse: lockd dev and lockd serve refuse a taken port with one
// line naming it, before starting anything.
func TestPortInUse(t *testing.T) {
	t.Parallel()
	bin := cluster.Build(t, cluster.LockdPkg)
	const replicas = 3
	for _, tc := range []struct {
		name string
		dev  bool
		raft bool // take replica 2's raft port, else replica 1's API port
	}{
		{"dev api", true, false},
		{"dev raft", true, true},
		{"serve api", false, false},
		{"serve raft", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apiBase, raftBase := freePortRun(t, replicas), freePortRun(t, replicas)
			id, kind, port := 1, "api", apiBase
			if tc.raft {
				id, kind, port = 2, "raft", raftBase+1
			}
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			ln, err := net.Listen("tcp", addr)
			must(t, err)
			defer ln.Close()

			args := devArgs(t, replicas, apiBase, raftBase)
			if !tc.dev {
				args = []string{"serve", "--id", fmt.Sprint(id), "--data-dir", t.TempDir(), "--cell", "demo,1,/demo", "--plain-http"}
				for i := 1; i <= replicas; i++ {
					args = append(args, "--peer", fmt.Sprintf("%d,127.0.0.1:%d,127.0.0.1:%d", i, raftBase+i-1, apiBase+i-1))
				}
			}
			cmd := exec.Command(bin, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			must(t, cmd.Start())
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			var kids []procID
			t.Cleanup(func() {
				for _, p := range kids {
					if p.alive() {
						_ = syscall.Kill(p.pid, syscall.SIGKILL)
					}
				}
			})
			var werr error
			select {
			case werr = <-waited:
			case <-time.After(30 * time.Second):
				kids = childProcs(cmd.Process.Pid, "")
				_ = cmd.Process.Kill()
				<-waited
				t.Fatalf("still running 30s after start with %s taken (children %v)\nstdout:\n%s\nstderr:\n%s", addr, kids, stdout.String(), stderr.String())
			}
			want := fmt.Sprintf("lockd: port %s (%s of replica %d) is already in use", addr, kind, id)
			if werr == nil || strings.TrimSpace(stderr.String()) != want {
				t.Fatalf("exit %v, stderr:\n%s\nwant exit status 1 and exactly %q", werr, stderr.String(), want)
			}
		})
	}
}

// devArgs are `lockd dev` flags for a small cluster on free ports, with
// one lockproxy.
func devArgs(t *testing.T, replicas, apiBase, raftBase int) []string {
	proxy := cluster.Build(t, cluster.ProxyPkg)
	// --lockds as many as the ports reserved: dev's default runs more
	// lockds, on ports past the run (another test's by then).
	return []string{"dev", "--data-dir", t.TempDir(), "--replicas", fmt.Sprint(replicas), "--lockds", fmt.Sprint(replicas),
		"--api-port", fmt.Sprint(apiBase), "--raft-port", fmt.Sprint(raftBase),
		"--rtt-ms", "20", "--lease", "3s",
		"--proxies", "1", "--proxy-bin", proxy, "--proxy-port", fmt.Sprint(freePortRun(t, 1))}
}

// runBounded runs bin with args and returns its combined output.
func runBounded(t *testing.T, d time.Duration, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

// freePortRun finds n consecutive free ports on 127.0.0.1 (dev numbers its
// replicas' ports from a base).
// freePortRun is cluster.FreePortRun, or the test fails.
func freePortRun(t *testing.T, n int) int {
	t.Helper()
	base, err := cluster.FreePortRun(n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// procID names a process by PID and start time, so a reused PID is not
// taken for it.
type procID struct {
	pid   int
	start string // field 22 of /proc/PID/stat; "" matches any
}

func (p procID) String() string { return strconv.Itoa(p.pid) }

// procStat returns the state, parent PID and start time of pid.
func procStat(pid int) (state string, ppid int, start string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return "", 0, "", false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return "", 0, "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid, f[19], true
}

// alive: the process exists, is not a zombie, and is the one we saw.
func (p procID) alive() bool {
	state, _, start, ok := procStat(p.pid)
	return ok && state != "Z" && (p.start == "" || p.start == start)
}

func (p procID) cmdline() string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.pid))
	return strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\x00", " ")), " ")
}

// childProcs lists the live children of ppid whose command line contains
// arg (any child if arg is "").
func childProcs(ppid int, arg string) []procID {
	ents, _ := os.ReadDir("/proc")
	var out []procID
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pp, start, ok := procStat(pid)
		if !ok || pp != ppid || state == "Z" {
			continue
		}
		p := procID{pid: pid, start: start}
		if arg == "" || strings.Contains(" "+p.cmdline()+" ", " "+arg+" ") {
			out = append(out, p)
		}
	}
	return out
}

// waitChildProcs waits (bounded) until ppid has n children running arg.
func waitChildProcs(t *testing.T, ppid, n int, arg string) []procID {
	t.Helper()
	var kids []procID
	for attempt := 0; attempt < 600; attempt++ {
		if kids = childProcs(ppid, arg); len(kids) >= n {
			return kids
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pid %d has %d %q children after 30s, want %d", ppid, len(kids), arg, n)
	return nil
}

// waitStatus polls addr's /v1/status until it answers, for up to d.
func waitStatus(t *testing.T, addr string, d time.Duration) api.StatusResponse {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(d)
	var lastErr error
	for time.Now().Before(deadline) {
		var st api.StatusResponse
		resp, err := hc.Get("http://" + addr + api.RouteStatus)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
		}
		if err == nil {
			return st
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s%s: no answer in %v: %v", addr, api.RouteStatus, d, lastErr)
	return api.StatusResponse{}
}

// TestPprofOnlyWhenAsked: /debug/pprof/ is served with --pprof and is
// not found without it.
func TestPprofOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"off by default", nil, http.StatusNotFound},
		{"--pprof", []string{"--pprof"}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster.Start(t, cluster.Options{Replicas: 3, ExtraArgs: tc.args})
			hc := &http.Client{Timeout: 10 * time.Second}
			defer hc.CloseIdleConnections()
			resp, err := hc.Get("http://" + c.Endpoints()[0] + "/debug/pprof/")
			must(t, err)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("GET /debug/pprof/: %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}
