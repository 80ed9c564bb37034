package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/spf13/cobra"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp's own janitors, which outlive a closed client or server
		// by up to their idle period: the SDK's pool cleaner and the fake
		// server's Date ticker.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	)
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// at runs lockctl against the fake with a short timeout.
func at(t *testing.T, f *fakeServer, args ...string) result {
	t.Helper()
	return run(t, append([]string{"--endpoints", f.addr, "--timeout", "3s"}, args...)...)
}

func (r result) ok(t *testing.T) result {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	return r
}

// failed checks exit status and that stderr is exactly one line starting
// with "lockctl: <code>: ".
func (r result) failed(t *testing.T, exit int, code api.Code) {
	t.Helper()
	if r.code != exit {
		t.Fatalf("exit %d, want %d (stderr %q)", r.code, exit, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") || !strings.HasPrefix(r.stderr, "lockctl: "+string(code)+": ") {
		t.Fatalf("stderr %q: want one line naming %s", r.stderr, code)
	}
}

func TestPutGetLsRm(t *testing.T) {
	f := newFakeServer(t)
	if r := at(t, f, "put", "/demo/a", "hello").ok(t); r.stdout != "version: 1\n" {
		t.Fatalf("put printed %q", r.stdout)
	}
	if r := at(t, f, "put", "/demo/a", "again").ok(t); r.stdout != "version: 2\n" {
		t.Fatalf("put printed %q", r.stdout)
	}
	if r := at(t, f, "get", "/demo/a").ok(t); r.stdout != "again\nversion: 2\n" {
		t.Fatalf("get printed %q", r.stdout)
	}
	r := at(t, f, "get", "/demo/a", "-o", "json").ok(t)
	var n api.Node
	if err := json.Unmarshal([]byte(r.stdout), &n); err != nil || n.Path != "/demo/a" || string(n.Value) != "again" || n.Version != 2 {
		t.Fatalf("get -o json: %q (%v)", r.stdout, err)
	}
	at(t, f, "put", "/demo/b", "x").ok(t)
	if r := at(t, f, "ls", "/demo").ok(t); r.stdout != "a\nb\n" {
		t.Fatalf("ls printed %q", r.stdout)
	}
	r = at(t, f, "--output", "json", "ls", "/demo/a").ok(t)
	var ls struct {
		Path     string   `json:"path"`
		Children []string `json:"children"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil || ls.Path != "/demo/a" || ls.Children == nil || len(ls.Children) != 0 {
		t.Fatalf("ls -o json: %q (%v)", r.stdout, err)
	}
	if r := at(t, f, "rm", "/demo/b").ok(t); r.stdout != "" {
		t.Fatalf("rm printed %q", r.stdout)
	}
	at(t, f, "get", "/demo/b").failed(t, 1, api.CodeNoNode)
}

func TestErrorLine(t *testing.T) {
	f := newFakeServer(t)
	r := at(t, f, "get", "/demo/x")
	r.failed(t, 1, api.CodeNoNode)
	if r.stderr != "lockctl: no_node: /demo/x does not exist\n" || r.stdout != "" {
		t.Fatalf("stderr %q stdout %q", r.stderr, r.stdout)
	}
	at(t, f, "get", "/elsewhere/x").failed(t, 1, api.CodeWrongCell) // refused locally
	at(t, f, "get", "relative").failed(t, 1, api.CodeInvalidPath)
	at(t, f, "rm", "/demo/x").failed(t, 1, api.CodeNoNode)
}

func TestVersionFlag(t *testing.T) {
	f := newFakeServer(t)
	at(t, f, "put", "/demo/v", "1", "--version", "0").ok(t)
	at(t, f, "put", "/demo/v", "1", "--version", "0").failed(t, 1, api.CodeNodeExists)
	at(t, f, "put", "/demo/v", "2", "--version", "7").failed(t, 1, api.CodeVersionMismatch)
	if r := at(t, f, "put", "/demo/v", "2", "--version", "1").ok(t); r.stdout != "version: 2\n" {
		t.Fatalf("CAS put printed %q", r.stdout)
	}
	at(t, f, "put", "/demo/v", "3").ok(t) // no --version: upsert
	var versions []*uint64
	for _, b := range f.requests(api.RoutePut) {
		var req api.PutRequest
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, req.Version)
	}
	want := []any{uint64(0), uint64(0), uint64(7), uint64(1), nil}
	for i, v := range versions {
		if (v == nil) != (want[i] == nil) || (v != nil && *v != want[i]) {
			t.Fatalf("put %d sent version %v, want %v", i, v, want[i])
		}
	}
	at(t, f, "rm", "/demo/v", "--version", "1").failed(t, 1, api.CodeVersionMismatch)
	at(t, f, "rm", "/demo/v", "--version", "3").ok(t)
}

func TestUsageErrors(t *testing.T) {
	f := newFakeServer(t)
	for _, args := range [][]string{
		{"put", "/demo/a"},
		{"get"},
		{"get", "/a", "/b"},
		{"ls"},
		{"rm"},
		{"status", "extra"},
		{"get", "/demo/a", "-o", "yaml"},
		{"put", "/demo/a", "v", "--version", "x"},
		{"get", "/demo/a", "--bogus"},
		{"frobnicate"},
		{"--timeout", "0s", "get", "/demo/a"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			at(t, f, args...).failed(t, 2, api.CodeBadRequest)
		})
	}
	if n := len(f.requests(api.RouteGet)) + len(f.requests(api.RoutePut)); n != 0 {
		t.Fatalf("usage errors sent %d requests", n)
	}
	if r := run(t, "--help"); r.code != 0 || !strings.Contains(r.stdout, "status") {
		t.Fatalf("--help: %+v", r)
	}
}

func TestEndpointsAndTokenFromEnv(t *testing.T) {
	f := newFakeServer(t)
	t.Setenv(EnvEndpoints, f.addr)
	t.Setenv(EnvAuthToken, "tok")
	run(t, "--timeout", "3s", "put", "/demo/e", "v").ok(t)
	for _, a := range f.auths() {
		if a != "Bearer tok" {
			t.Errorf("Authorization %q", a)
		}
	}
	// The flag wins over the environment.
	t.Setenv(EnvEndpoints, deadAddr(t))
	run(t, "--endpoints", f.addr, "--timeout", "3s", "get", "/demo/e").ok(t)
	run(t, "--timeout", "300ms", "get", "/demo/e").failed(t, 1, api.CodeUnavailable)
}

func TestStatus(t *testing.T) {
	f := newFakeServer(t)
	dead := deadAddr(t)
	r := run(t, "--endpoints", f.addr+","+dead, "--timeout", "3s", "status").ok(t)
	// What is wrong first: the fake's three replicas all answer (the dead
	// endpoint is not a lockd of its directory), so nothing is.
	health, table, _ := strings.Cut(r.stdout, "\n\n")
	if health != "HEALTH ok: nothing wrong (1 cell, 1 lockd, 0 proxies)" {
		t.Fatalf("status health line %q in:\n%s", health, r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 {
		t.Fatalf("status table:\n%s", r.stdout)
	}
	for _, col := range []string{"ENDPOINT", "CELL", "REPLICA", "ROLE", "LEADER", "TERM", "APPLIED", "EPOCH", "CODEC"} {
		if !strings.Contains(lines[0], col) {
			t.Fatalf("header %q lacks %s", lines[0], col)
		}
	}
	if got := strings.Fields(lines[1]); len(got) != 9 || got[0] != f.addr || got[1] != "demo" || got[2] != "1" || got[3] != "leader" || got[4] != f.addr || got[5] != "3" || got[7] != "2" || got[8] != "0/0" {
		t.Fatalf("live row %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], dead) || !strings.Contains(lines[2], "unreachable") {
		t.Fatalf("dead row %q", lines[2])
	}

	r = run(t, "--endpoints", f.addr+","+dead, "--timeout", "3s", "status", "-o", "json").ok(t)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Endpoints) != 2 || rep.Health == nil || rep.Health.Level != api.HealthOK {
		t.Fatalf("status -o json: %q (%v)", r.stdout, err)
	}
	rows := rep.Endpoints
	if rows[0].Status == nil || rows[0].Status.Cells[0].Role != "leader" || rows[1].Error == nil || rows[1].Error.Code != api.CodeUnavailable {
		t.Fatalf("rows %+v", rows)
	}

	r = run(t, "--endpoints", dead, "--timeout", "2s", "status")
	r.failed(t, 1, api.CodeUnavailable)
	if !strings.Contains(r.stdout, "unreachable") {
		t.Fatalf("all-dead table:\n%s", r.stdout)
	}
}

func TestFormatError(t *testing.T) {
	if got := FormatError(api.Errorf(api.CodeNoNode, "/demo/x does not exist")); got != "lockctl: no_node: /demo/x does not exist" {
		t.Fatal(got)
	}
	if got := FormatError(api.Errorf(api.CodeInternal, "two\nlines")); got != "lockctl: internal: two lines" {
		t.Fatal(got)
	}
	if ExitCode(nil) != 0 || ExitCode(usagef("x")) != 2 || ExitCode(api.ErrNoNode) != 1 {
		t.Fatal("exit codes")
	}
}

// TestNoClusterFailsFast: with nothing listening at any endpoint, a
// command says so (naming them, and how to start a cluster) long before
// its --timeout, rather than retrying for all of it.
func TestNoClusterFailsFast(t *testing.T) {
	var dead []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, ln.Addr().String())
		_ = ln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"get", "/demo/x"}, {"put", "/demo/x", "y"}, {"lock", "/demo/l", "--", "true"}} {
		var out, errb bytes.Buffer
		code := Main(ctx, append([]string{"--endpoints", strings.Join(dead, ","), "--timeout", "90s"}, args...), &out, &errb)
		r := result{code, out.String(), errb.String()}
		r.failed(t, 1, api.CodeUnavailable)
		for _, want := range append(dead, "no lockd listens", "make run") {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: stderr %q does not name %q", args, r.stderr, want)
			}
		}
	}
}

// TestEveryCommandHasAnExample: each command's --help shows one.
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" && c.Name() != "help" && c.Name() != "completion" && !c.Hidden {
			t.Errorf("lockctl %s has no example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCommand())
}

func TestPrintQueue(t *testing.T) {
	now := time.UnixMilli(1_700_000_010_000)
	var b bytes.Buffer
	q := api.LockQueueResponse{Path: "/demo/l", Entries: []api.LockEntry{{Node: "/demo/l/w-0000000002", Mode: api.LockExclusive, Session: 7}},
		Delay: &api.LockDelayInfo{Since: 41, MS: 30_000, ReleasedAtMS: 1_700_000_000_000, UntilMS: 1_700_000_030_000}}
	if err := printQueue(&b, q, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"lock-delay", "index 41", "for 30s", "(20s left)", "waiter 0", "/demo/l/w-0000000002"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
