package ctl

// Every lockctl command's -o json output has the shape docs/lockctl.md
// shows (read from the page: jsondoc_test.go), and every command of the
// tree has one there, or is listed in noJSONOutput with the reason. The
// commands run against the fake cell, its admin routes answered by
// adminFake (adminfake_test.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/fake"
)

// noJSONOutput are the commands that print no JSON, with or without
// -o json; check, if set, shows that under -o json.
var noJSONOutput = []struct {
	cmd, why string
	check    func(t *testing.T, f *shapeFake)
}{
	{"rm", "prints nothing: success is exit status 0", checkPrintsNothing("rm", "/demo/config/flag")},
	{"lock", "prints nothing of its own: stdout is COMMAND's", checkPrintsNothing("lock", "/demo/locks/nightly", "--", "true")},
	{"help", "prints help text", nil},
	{"completion bash", "prints a shell script", checkCompletion("bash")},
	{"completion zsh", "prints a shell script", checkCompletion("zsh")},
	{"completion fish", "prints a shell script", checkCompletion("fish")},
	{"completion powershell", "prints a shell script", checkCompletion("powershell")},
}

// pendingShapes are commands whose JSON is being changed: docs/lockctl.md
// holds a placeholder, and their case runs once the page shows a shape.
var pendingShapes = map[string]string{}

// shapeCase makes one command print its JSON: args (-o json is added)
// after setup. A streaming command has lines, which makes every kind of
// line happen while it runs (out has the lines so far); it is then
// interrupted.
type shapeCase struct {
	key   string
	args  []string
	setup func(t *testing.T, f *shapeFake)
	lines func(t *testing.T, f *shapeFake, out *lineBuffer)
}

func shapeCases() []shapeCase {
	w := strings.Fields
	return []shapeCase{
		{key: "put", args: w("put /demo/config/flag on")},
		{key: "get", args: w("get /demo/config/flag"), setup: putFlag},
		{key: "ls", args: w("ls /demo/config"), setup: putFlag},
		{key: "txn", args: []string{"txn", "--if", "missing /demo/a", "--then", "create /demo/a 1", "--then", "put /demo/count 7"}},
		{key: "queue", args: w("queue /demo/locks/billing"), setup: lockDelayWithWaiter},
		{key: "elect", args: w("elect /demo/elections/web host-a:8080"), lines: electLines},
		{key: "leader", args: w("leader /demo/elections/web"), setup: campaign},
		{key: "members", args: w("members /demo/groups/web"), setup: joinGroup},
		{key: "watch", args: w("watch /demo/w"), lines: watchLines},
		{key: "status", args: w("status")},
		{key: "cells", args: w("cells")},
		{key: "cell create", args: w("cell create global --replicas 3 --on 2,4,6 --timing heartbeat=500ms,election=5s,lease=30s,keepalive=10s,grace=2m")},
		{key: "member add", args: w("member add payments 6 --learner")},
		{key: "member promote", args: w("member promote payments 6"), setup: lockctlSetup("member add payments 6 --learner")},
		{key: "member remove", args: w("member remove payments 2")},
		{key: "prefix show", args: w("prefix show /payments"), setup: migrationInFlight},
		{key: "prefix assign", args: w("prefix assign /orders orders"), setup: lockctlSetup("cell create orders --replicas 3")},
		{key: "migrate", args: w("migrate /cell3 --to payments")},
		{key: "migrate --abort", args: w("migrate /payments --abort"), setup: migrationInFlight},
		{key: "backup", args: w("backup payments")},
		{key: "restore", args: w("restore payments --index 812345 --on 3,4,5")},
		{key: "tenant put", args: w("tenant put payments --grant /payments=write,lock --nodes 50000 --new-token")},
		{key: "tenant token", args: w("tenant token payments")},
		{key: "tenant revoke", args: w("tenant revoke payments")},
		{key: "tenant delete", args: w("tenant delete payments")},
		{key: "tenant list", args: w("tenant list")},
	}
}

// TestJSONShapes runs every case and matches its output with the page's
// shape: no field the page does not show, every field it shows unless
// optional, each of the same JSON type.
func TestJSONShapes(t *testing.T) {
	shapes := loadShapes(t)
	cases := shapeCases()
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			exs := shapes[c.key]
			if why := pendingShapes[c.key]; why != "" && len(exs) == 0 {
				t.Skip(why)
			}
			if len(exs) == 0 {
				t.Fatalf("docs/lockctl.md shows no shape for %q: add one (<!-- json-shape: %s -->)", c.key, c.key)
			}
			if err := argsMatchKey(c.key, c.args); err != "" {
				t.Fatal(err)
			}
			f := newShapeFake(t)
			if c.setup != nil {
				c.setup(t, f)
			}
			var probs []string
			if c.lines != nil {
				probs = matchLines(f.stream(t, c), exs)
			} else {
				probs = matchDocument(f.lockctl(t, slices.Concat(c.args, []string{"-o", "json"})...).ok(t).stdout, exs)
			}
			for _, p := range probs {
				t.Errorf("lockctl %s -o json: %s", c.key, p)
			}
		})
	}
	for key := range shapes {
		if !slices.ContainsFunc(cases, func(c shapeCase) bool { return c.key == key }) {
			t.Errorf("docs/lockctl.md shows a shape for %q, which no shapeCase runs: add one", key)
		}
	}
}

// TestEveryCommandHasAJSONShape walks the command tree: every command
// that runs has a shape on the page, or a noJSONOutput (or pendingShapes)
// entry saying why not.
func TestEveryCommandHasAJSONShape(t *testing.T) {
	shapes := loadShapes(t)
	documented := map[string]bool{}
	for key := range shapes {
		documented[commandOf(key)] = true
	}
	noJSON := map[string]bool{}
	for _, n := range noJSONOutput {
		noJSON[n.cmd] = true
	}
	root := NewRootCommand()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	commands := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if p := strings.TrimPrefix(c.CommandPath(), root.Name()+" "); c.Runnable() && !c.Hidden && c != root {
			commands[p] = true
			switch {
			case noJSON[p] && documented[p]:
				t.Errorf("lockctl %s: in noJSONOutput, and docs/lockctl.md shows its JSON", p)
			case pendingShapes[p] != "" && documented[p]:
				t.Errorf("lockctl %s: docs/lockctl.md shows its JSON now: remove it from pendingShapes", p)
			case !noJSON[p] && pendingShapes[p] == "" && !documented[p]:
				t.Errorf("lockctl %s: docs/lockctl.md shows no JSON for it: add its shape (<!-- json-shape: %s -->), or list it in noJSONOutput with the reason", p, p)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for p := range documented {
		if !commands[p] {
			t.Errorf("docs/lockctl.md shows the JSON of %q, which is no lockctl command", p)
		}
	}
	for _, n := range noJSONOutput {
		if !commands[n.cmd] {
			t.Errorf("noJSONOutput lists %q, which is no lockctl command", n.cmd)
		}
	}
}

// TestNoJSONOutput: the commands listed as printing no JSON print none.
func TestNoJSONOutput(t *testing.T) {
	for _, n := range noJSONOutput {
		if n.check == nil {
			continue
		}
		t.Run(n.cmd, func(t *testing.T) { n.check(t, newShapeFake(t)) })
	}
}

func loadShapes(t *testing.T) docShapes {
	t.Helper()
	b, err := os.ReadFile(lockctlDoc)
	if err != nil {
		t.Fatal(err)
	}
	shapes, err := parseDocShapes(string(b))
	if err != nil {
		t.Fatalf("%s: %v", lockctlDoc, err)
	}
	return shapes
}

// commandOf is a key's command path: its words up to a flag.
func commandOf(key string) string {
	words := strings.Fields(key)
	if i := slices.IndexFunc(words, func(w string) bool { return strings.HasPrefix(w, "-") }); i >= 0 {
		words = words[:i]
	}
	return strings.Join(words, " ")
}

// argsMatchKey says what is wrong with a case whose arguments do not run
// its key's command (with its flags).
func argsMatchKey(key string, args []string) string {
	words := strings.Fields(commandOf(key))
	if len(args) < len(words) || !slices.Equal(args[:len(words)], words) {
		return "the case runs " + strings.Join(args, " ") + ", not " + key
	}
	for _, flag := range strings.Fields(strings.TrimPrefix(key, commandOf(key))) {
		if !slices.Contains(args, flag) {
			return "the case runs " + strings.Join(args, " ") + ", without " + flag
		}
	}
	return ""
}

// matchDocument matches a command's whole output: one JSON document.
func matchDocument(stdout string, exs []*docExample) []string {
	if len(exs) != 1 {
		return []string{"docs/lockctl.md shows more than one shape for a command that prints one document"}
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	var v any
	if err := dec.Decode(&v); err != nil {
		return []string{"not JSON: " + err.Error() + ": " + stdout}
	}
	if _, err := dec.Token(); err != io.EOF {
		return []string{"more than one JSON document: " + stdout}
	}
	return matchShape(v, exs[0].root, "")
}

// matchLines matches a streaming command's lines, each with the example
// of its type; every example must be seen.
func matchLines(stdout string, exs []*docExample) []string {
	var probs []string
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			probs = append(probs, "a line that is not a JSON object: "+line)
			continue
		}
		typ, _ := v["type"].(string)
		i := slices.IndexFunc(exs, func(ex *docExample) bool { return ex.typ == typ })
		if i < 0 {
			probs = append(probs, "a line of type "+typ+", which docs/lockctl.md does not show: "+line)
			continue
		}
		seen[typ] = true
		probs = append(probs, matchShape(v, exs[i].root, "")...)
	}
	for _, ex := range exs {
		if ex.typ == "" {
			probs = append(probs, "docs/lockctl.md line "+strconv.Itoa(ex.line)+": a line's example needs its \"type\"")
		} else if !seen[ex.typ] {
			probs = append(probs, "no line of type "+ex.typ+" (docs/lockctl.md line "+strconv.Itoa(ex.line)+") in the output:\n"+stdout)
		}
	}
	return uniq(probs)
}

// shapeFake is the fake cell with its admin routes.
type shapeFake struct {
	*fakeServer
	admin *adminFake
}

func newShapeFake(t *testing.T) *shapeFake {
	f := newFakeServer(t)
	return &shapeFake{fakeServer: f, admin: newAdminFake(f)}
}

// globals are the flags every run gets: --direct, for the directory lists
// a proxy (the fake too).
func (f *shapeFake) globals() []string {
	return []string{"--endpoints", f.addr, "--timeout", "5s", "--direct"}
}

func (f *shapeFake) lockctl(t *testing.T, args ...string) result {
	t.Helper()
	return run(t, append(f.globals(), args...)...)
}

// client is an SDK client of the fake, closed when the test ends.
func (f *shapeFake) client(t *testing.T) *sdk.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := sdk.New(ctx, sdk.Config{Endpoints: []string{f.addr}, Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// stream runs a streaming case until its lines are made, then interrupts
// it, and returns what it printed.
func (f *shapeFake) stream(t *testing.T, c shapeCase) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out lineBuffer
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- Main(ctx, slices.Concat(f.globals(), c.args, []string{"-o", "json"}), &out, &errb) }()
	defer func() {
		cancel()
		code := <-done
		if code != 0 || errb.Len() > 0 {
			t.Errorf("exit %d, stderr %q", code, errb.String())
		}
	}()
	c.lines(t, f, &out)
	return out.String()
}

// lineBuffer is a streaming command's stdout.
type lineBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lineBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lineBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitLines waits until n lines are out.
func (l *lineBuffer) waitLines(t *testing.T, n int) {
	t.Helper()
	waitFor(t, strconv.Itoa(n)+" lines", func() bool { return strings.Count(l.String(), "\n") >= n })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10s", what)
		}
	}
}

func putFlag(t *testing.T, f *shapeFake) {
	f.lockctl(t, "put", "/demo/config/flag", "on").ok(t)
}

func lockctlSetup(args string) func(t *testing.T, f *shapeFake) {
	return func(t *testing.T, f *shapeFake) { f.lockctl(t, strings.Fields(args)...).ok(t) }
}

func migrationInFlight(_ *testing.T, f *shapeFake) { f.admin.startMigration("/payments", "cell3") }

// lockDelayWithWaiter puts /demo/locks/billing in lock-delay (its holder's
// session expired holding it) with a waiter queued.
func lockDelayWithWaiter(t *testing.T, f *shapeFake) {
	const lock = "/demo/locks/billing"
	holder := f.client(t).NewMutex(lock, sdk.WithLockDelay(30*time.Second))
	if err := holder.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	waiter := f.client(t).NewMutex(lock)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = waiter.Lock(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "waiter", func() bool { return len(f.Children(lock)) == 2 })
	n, _ := f.Node(holder.Node())
	f.Expire(n.Owner)
}

func campaign(t *testing.T, f *shapeFake) {
	if err := f.client(t).NewElection("/demo/elections/web").Campaign(t.Context(), []byte("host-a:8080")); err != nil {
		t.Fatal(err)
	}
}

func joinGroup(t *testing.T, f *shapeFake) {
	if _, err := f.client(t).Join(t.Context(), "/demo/groups/web", []byte("host-a:8080")); err != nil {
		t.Fatal(err)
	}
}

// electLines: leading; its node deleted (lost); leading again. (Its
// session expiring instead can end lockctl elect with "a campaign is
// already in progress": the SDK's Election.Campaign sees the grant of a
// session that ended as busy until the monitor marks it lost.)
func electLines(t *testing.T, f *shapeFake, out *lineBuffer) {
	const name = "/demo/elections/web"
	out.waitLines(t, 1)
	kids := f.Children(name)
	if len(kids) != 1 {
		t.Fatalf("candidates %v", kids)
	}
	f.lockctl(t, "rm", name+"/"+kids[0]).ok(t)
	out.waitLines(t, 3)
}

// watchLines: /demo/w created, changed, a child created and deleted, then
// /demo/w deleted; each line waits for the one before (the watch prints
// the latest state, and the line after its watches are armed again).
func watchLines(t *testing.T, f *shapeFake, out *lineBuffer) {
	const p = "/demo/w"
	waitFor(t, "watch on "+p, func() bool { return f.watching(p) })
	for i, args := range [][]string{{"put", p, "on"}, {"put", p, "off"}, {"put", p + "/c", "x"}, {"rm", p + "/c"}, {"rm", p}} {
		f.lockctl(t, args...).ok(t)
		out.waitLines(t, i+1)
	}
}

// watching reports whether a session has a data watch armed on path.
func (f *shapeFake) watching(path string) bool {
	for _, b := range f.requests(api.RouteGet) {
		var req api.ReadRequest
		if json.Unmarshal(b, &req) == nil && req.Path == path && req.Watch == api.WatchData &&
			f.Armed(req.Session, fake.WatchKey{Path: path, Kind: api.WatchData}) {
			return true
		}
	}
	return false
}

// checkPrintsNothing runs a command that prints no JSON (after putFlag):
// nothing on stdout.
func checkPrintsNothing(args ...string) func(t *testing.T, f *shapeFake) {
	return func(t *testing.T, f *shapeFake) {
		putFlag(t, f)
		if r := f.lockctl(t, slices.Concat(args, []string{"-o", "json"})...).ok(t); r.stdout != "" {
			t.Fatalf("printed %q", r.stdout)
		}
	}
}

// checkCompletion: completion SHELL prints its script, -o json or not.
func checkCompletion(shell string) func(t *testing.T, f *shapeFake) {
	return func(t *testing.T, f *shapeFake) {
		r := f.lockctl(t, "completion", shell, "-o", "json").ok(t)
		if !strings.Contains(r.stdout, "lockctl") || json.Valid([]byte(r.stdout)) {
			t.Fatalf("completion %s printed %.200q", shell, r.stdout)
		}
	}
}
