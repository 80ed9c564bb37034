package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestEtcdctl runs etcdctl, unchanged, against the etcd gateway
// (lockproxy --etcd-listen) on three real lockds: Debian's 3.4 and the
// module's current one (tests/cluster/etcdctl.go), each in every mode:
// plain, tokens required (--user NAME:TOKEN), mutual TLS (--cacert,
// --cert, --key with the development CA). Per build and mode: put, get
// (single, prefix, keys-only, count), del (single, prefix), a relative key
// and a refused one; txn from an interactive stdin script, both branches;
// watch in the background seeing a put and a delete; lease grant,
// keep-alive --once, timetolive --keys, list, revoke (its key goes);
// `lock NAME -- CMD` twice at once, their critical sections (timestamps
// the commands write to files) never overlapping; `elect NAME PROPOSAL`
// twice with an observer, the leader's etcdctl killed by PID (SIGKILL in
// plain mode: the other becomes leader once the dead one's lease ends;
// SIGTERM in the others: etcdctl resigns); endpoint
// status, endpoint health, member list. Every etcdctl run is bounded
// (etcdctlTimeout) and its output checked. docs/etcd.md "Tests".
func TestEtcdctl(t *testing.T) {
	t.Parallel()
	builds := etcdctlBuilds()
	for _, mode := range etcdModes {
		t.Run(string(mode), func(t *testing.T) {
			g := startEtcdGW(t, mode)
			g.waitGateway(t, g.client(t))
			for _, b := range builds {
				t.Run(b.name, func(t *testing.T) {
					t.Parallel() // the builds' elect failovers wait out a lease together
					b.need(t)
					x := &etcdctlRun{bin: b.bin.Path, flags: g.ctlFlags(), base: b.keyBase(), addr: g.addr,
						rel: "ctl-" + strings.TrimPrefix(b.keyBase(), "/demo/ctl-"), dir: t.TempDir(), v34: strings.HasPrefix(b.bin.Version, "3.4."), killSig: syscall.SIGTERM}
					if mode == etcdPlain {
						x.killSig = syscall.SIGKILL
					}
					t.Run("put-get-del", x.putGetDel)
					t.Run("txn", x.txn)
					t.Run("watch", x.watch)
					t.Run("lease", x.lease)
					t.Run("lock", x.lock)
					t.Run("elect", x.elect)
					t.Run("endpoint", x.endpoint)
				})
			}
		})
	}
}

// etcdctlTimeout bounds one etcdctl run (its own --command-timeout is 30s).
const etcdctlTimeout = 45 * time.Second

// etcdctlBackgroundTimeout bounds an etcdctl left running (watch, lock,
// elect): killed by PID then, or when its test ends.
const etcdctlBackgroundTimeout = 4 * time.Minute

// etcdctlWaitAttempts bounds a wait on a background etcdctl's output
// (polled every etcdctlPoll).
const (
	etcdctlWaitAttempts = 1200
	etcdctlPoll         = 100 * time.Millisecond
)

// etcdElectFailover bounds the failover after the leader's etcdctl is
// killed: etcdctl elect's session has etcd's default TTL, 60 s, and the
// gateway ends the lease when it is not renewed past it.
const etcdElectFailover = 100 * time.Second

// etcdctlRun runs one etcdctl build against one gateway.
type etcdctlRun struct {
	bin   string
	flags []string
	base  string // absolute key prefix of this build's own ("/demo/ctl-debian-3-4")
	rel   string // relative key of this build's own (under the default prefix /etcd)
	addr  string
	dir   string
	v34   bool // Debian's 3.4: no --count-only, health on stderr
	// killSig ends the elected etcdctl: SIGKILL in plain mode (its lease
	// must run out: 60 s), SIGTERM in the others (etcdctl resigns), so the
	// modes do not each wait out a lease.
	killSig syscall.Signal
}

func (x *etcdctlRun) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, x.bin, append(append([]string{}, x.flags...), args...)...)
	cmd.Env = os.Environ()
	if x.v34 {
		cmd.Env = append(cmd.Env, "ETCDCTL_API=3") // 3.5 on warn of it: v3 is all they speak
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// try runs etcdctl args (stdin if not "") to its end.
func (x *etcdctlRun) try(stdin string, args ...string) (string, string, error) {
	ctx, cancel := ctxFor(etcdctlTimeout)
	defer cancel()
	cmd := x.command(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// run is try failing t on an error.
func (x *etcdctlRun) run(t *testing.T, args ...string) string {
	t.Helper()
	return x.runIn(t, "", args...)
}

func (x *etcdctlRun) runIn(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errs, err := x.try(stdin, args...)
	if err != nil {
		t.Fatalf("etcdctl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errs)
	}
	return out
}

// expect runs args and requires exactly want on stdout.
func (x *etcdctlRun) expect(t *testing.T, want string, args ...string) {
	t.Helper()
	if got := x.run(t, args...); got != want {
		t.Fatalf("etcdctl %s:\n got %q\nwant %q", strings.Join(args, " "), got, want)
	}
}

func (x *etcdctlRun) putGetDel(t *testing.T) {
	b := x.base
	x.expect(t, "OK\n", "put", b+"/a", "1")
	x.expect(t, "OK\n", "put", b+"/b", "2")
	x.expect(t, "OK\n", "put", b+"/c/d", "3") // its parent is made a container: not a key
	x.expect(t, b+"/a\n1\n", "get", b+"/a")
	x.expect(t, b+"/a\n1\n"+b+"/b\n2\n"+b+"/c/d\n3\n", "get", "--prefix", b+"/")
	x.expect(t, b+"/b\n2\n", "get", b+"/b", b+"/c") // a range [b, c): b only
	x.expect(t, b+"/a\n\n"+b+"/b\n\n"+b+"/c/d\n\n", "get", "--prefix", "--keys-only", b+"/")
	if out := x.run(t, "get", "--prefix", "-w", "fields", b+"/"); !strings.Contains(out, "\"Count\" : 3\n") {
		t.Fatalf("get --prefix -w fields: %q, want \"Count\" : 3", out)
	}
	if !x.v34 { // --count-only came after 3.4
		out := x.run(t, "get", "--prefix", "--count-only", "-w", "fields", b+"/")
		if !strings.Contains(out, "\"Count\" : 3\n") || strings.Contains(out, "\"Key\"") {
			t.Fatalf("get --prefix --count-only -w fields: %q, want \"Count\" : 3 and no key", out)
		}
	}
	x.expect(t, b+"/c/d\n3\n", "get", "--prefix", "--limit=1", "--sort-by=VALUE", "--order=DESCEND", b+"/")
	// A relative key lives under the default prefix and comes back as written.
	x.expect(t, "OK\n", "put", x.rel, "rv")
	x.expect(t, x.rel+"\nrv\n", "get", x.rel)
	// A key outside every served prefix is refused, naming the rules.
	if out, errs, err := x.try("", "put", "/nowhere/x", "v"); err == nil || !strings.Contains(errs+out, "/demo") {
		t.Fatalf("put /nowhere/x: err %v, stdout %q, stderr %q: want a refusal naming the served prefixes", err, out, errs)
	}
	x.expect(t, "1\n", "del", b+"/a")
	x.expect(t, "2\n", "del", "--prefix", b+"/")
	x.expect(t, "", "get", "--prefix", b+"/")
	x.expect(t, "1\n", "del", x.rel)
	x.expect(t, "", "get", x.rel)
}

func (x *etcdctlRun) txn(t *testing.T) {
	k := x.base + "/txn"
	x.expect(t, "OK\n", "put", k, "v1")
	script := fmt.Sprintf("value(%q) = \"v1\"\nmod(%q) > \"0\"\n\nput %s v2\n\nget %s\n\n", k, k, k, k)
	out := x.runIn(t, script, "txn", "-i")
	if !strings.Contains(out, "SUCCESS\n\nOK\n") {
		t.Fatalf("txn (compares hold): %q, want SUCCESS then OK", out)
	}
	x.expect(t, k+"\nv2\n", "get", k)
	out = x.runIn(t, script, "txn", "-i") // value is v2 now: the else branch reads
	if !strings.Contains(out, "FAILURE\n\n"+k+"\nv2\n") {
		t.Fatalf("txn (compare fails): %q, want FAILURE then the key's value v2", out)
	}
	x.expect(t, "1\n", "del", k)
}

func (x *etcdctlRun) watch(t *testing.T) {
	p := x.base + "/w/"
	w := x.start(t, "watch", "--prefix", p)
	k := p + "k"
	// The watch is live once it reports a put: put until it does.
	seen := false
	for i := 0; i < 50 && !seen; i++ {
		x.expect(t, "OK\n", "put", k, "ready"+strconv.Itoa(i))
		seen = w.waitFor("PUT\n"+k+"\nready", 10) == nil
	}
	if !seen {
		t.Fatalf("watch --prefix %s never reported a put: %q (stderr %q)", p, w.out.String(), w.errb.String())
	}
	x.expect(t, "OK\n", "put", k, "final")
	x.expect(t, "1\n", "del", k)
	must(t, w.waitFor("PUT\n"+k+"\nfinal\nDELETE\n"+k+"\n", etcdctlWaitAttempts))
	x.expect(t, "OK\n", "put", x.base+"/unwatched", "x")
	x.expect(t, "1\n", "del", x.base+"/unwatched")
	w.stop(t)
	if strings.Contains(w.out.String(), "unwatched") {
		t.Fatalf("watch --prefix %s reported a key outside it: %q", p, w.out.String())
	}
}

var leaseGranted = regexp.MustCompile(`lease ([0-9a-f]+) granted with TTL\((\d+)s\)`)

func (x *etcdctlRun) lease(t *testing.T) {
	out := x.run(t, "lease", "grant", "30")
	m := leaseGranted.FindStringSubmatch(out)
	if m == nil || m[2] != "30" {
		t.Fatalf("lease grant 30: %q", out)
	}
	id, k := m[1], x.base+"/leased"
	x.expect(t, "OK\n", "put", "--lease="+id, k, "v")
	// The gateway answers the TTL every session of the lease is guaranteed
	// (less a drift margin, rounded down: docs/etcd.md "Lease"), where etcd
	// answers the granted TTL: 28 or 29 here, never more than 30.
	ka := regexp.MustCompile(`lease ` + id + ` keepalived with TTL\((\d+)\)`)
	out = x.run(t, "lease", "keep-alive", "--once", id)
	if m := ka.FindStringSubmatch(out); m == nil || atoi(m[1]) > 30 || atoi(m[1]) < 25 {
		t.Fatalf("lease keep-alive --once: %q, want a TTL of 25 to 30", out)
	}
	out = x.run(t, "lease", "timetolive", "--keys", id)
	if !strings.Contains(out, "lease "+id+" granted with TTL(30s)") || !strings.Contains(out, "attached keys(["+k+"])") {
		t.Fatalf("lease timetolive --keys: %q, want TTL(30s) and the key %s", out, k)
	}
	if out := x.run(t, "lease", "list"); !strings.Contains(out, id) {
		t.Fatalf("lease list: %q, want %s", out, id)
	}
	x.expect(t, "lease "+id+" revoked\n", "lease", "revoke", id)
	x.expect(t, "", "get", k) // the lease's key went with it
	if out := x.run(t, "lease", "timetolive", id); !strings.Contains(out, "already expired") {
		t.Fatalf("lease timetolive after revoke: %q, want already expired", out)
	}
}

// lock runs `etcdctl lock NAME -- sh -c CRITICAL` twice at once: each
// critical section writes its start and end times (and the lock's key and
// revision etcdctl passes it) to a file of its own; the intervals must not
// overlap, and the later holder's revision is the greater.
func (x *etcdctlRun) lock(t *testing.T) {
	name := x.base + "/lk"
	section := `echo "start $(date +%s%N) $ETCD_LOCK_KEY $ETCD_LOCK_REV" > "$0"; sleep 1; echo "end $(date +%s%N)" >> "$0"`
	var files []string
	var procs []*etcdctlBG
	for i := 0; i < 2; i++ {
		f := filepath.Join(x.dir, fmt.Sprintf("lock%d", i))
		files = append(files, f)
		procs = append(procs, x.start(t, "lock", "--ttl=10", name, "--", "sh", "-c", section, f))
	}
	for i, p := range procs {
		if err := p.wait(etcdctlTimeout); err != nil {
			keys, _, kerr := x.try("", "get", "--prefix", "-w", "json", name+"/")
			var recs []string
			for _, f := range files {
				b, _ := os.ReadFile(f)
				recs = append(recs, fmt.Sprintf("%s: %q", filepath.Base(f), b))
			}
			t.Fatalf("etcdctl lock #%d: %v\nstdout %q\nstderr %q\nkeys under %s/ now (%v): %s\ncritical sections: %s",
				i, err, p.out.String(), p.errb.String(), name, kerr, keys, strings.Join(recs, "; "))
		}
	}
	type hold struct {
		start, end, rev int64
		key             string
	}
	var h []hold
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		var r hold
		if n, err := fmt.Sscanf(string(b), "start %d %s %d\nend %d", &r.start, &r.key, &r.rev, &r.end); n != 4 {
			t.Fatalf("critical section record %s: %q: %v", f, b, err)
		}
		h = append(h, r)
	}
	if h[0].start > h[1].start {
		h[0], h[1] = h[1], h[0]
	}
	if h[1].start < h[0].end {
		t.Fatalf("two etcdctl lock holders at once: [%d, %d] and [%d, %d]", h[0].start, h[0].end, h[1].start, h[1].end)
	}
	if h[0].key == h[1].key || !strings.HasPrefix(h[0].key, name+"/") || h[1].rev <= h[0].rev {
		t.Fatalf("lock keys/revisions: first %q rev %d, second %q rev %d", h[0].key, h[0].rev, h[1].key, h[1].rev)
	}
	x.expect(t, "", "get", "--prefix", name+"/")
}

// elect campaigns twice with an observer, kills the leader's etcdctl by
// PID (SIGKILL in plain mode, SIGTERM in the others) and sees the other
// take over.
func (x *etcdctlRun) elect(t *testing.T) {
	name := x.base + "/el"
	obs := x.start(t, "elect", "-l", name)
	p1 := x.start(t, "elect", name, "p1")
	must(t, p1.waitFor("\np1\n", etcdctlWaitAttempts))
	must(t, obs.waitFor("\np1\n", etcdctlWaitAttempts))
	p2 := x.start(t, "elect", name, "p2")
	// p2 is campaigning: its key exists behind p1's.
	for i := 0; ; i++ {
		if out := x.run(t, "get", "--prefix", "--keys-only", name+"/"); strings.Count(out, name+"/") == 2 {
			break
		}
		if i == etcdctlWaitAttempts {
			t.Fatalf("p2's candidacy never showed under %s/", name)
		}
		time.Sleep(etcdctlPoll)
	}
	if strings.Contains(p2.out.String(), "p2") {
		t.Fatalf("p2 elected while p1 leads: %q", p2.out.String())
	}
	p1.kill(t, x.killSig)
	must(t, p2.waitFor("\np2\n", int(etcdElectFailover/etcdctlPoll)))
	must(t, obs.waitFor("\np2\n", etcdctlWaitAttempts))
	p2.kill(t, syscall.SIGINT) // resigns
	obs.kill(t, syscall.SIGINT)
	x.expect(t, "", "get", "--prefix", name+"/")
}

func (x *etcdctlRun) endpoint(t *testing.T) {
	if out := x.run(t, "endpoint", "status"); !strings.Contains(out, x.addr) {
		t.Fatalf("endpoint status: %q, want %s", out, x.addr)
	}
	// 3.4 prints health on stderr, later ones on stdout.
	if out, errs, err := x.try("", "endpoint", "health"); err != nil || !strings.Contains(out+errs, x.addr+" is healthy") {
		t.Fatalf("endpoint health: %v: stdout %q stderr %q", err, out, errs)
	}
	if out := x.run(t, "member", "list"); !strings.Contains(out, x.addr) || !strings.Contains(out, "started") {
		t.Fatalf("member list: %q, want a started member at %s", out, x.addr)
	}
}

// etcdctlBG is an etcdctl left running.
type etcdctlBG struct {
	cmd       *exec.Cmd
	out, errb syncBuffer
	done      chan struct{}
	err       error
	cancel    context.CancelFunc
}

// start runs etcdctl args in the background; the test's end kills it by
// PID if it still runs.
func (x *etcdctlRun) start(t *testing.T, args ...string) *etcdctlBG {
	t.Helper()
	ctx, cancel := ctxFor(etcdctlBackgroundTimeout)
	b := &etcdctlBG{done: make(chan struct{}), cancel: cancel}
	b.cmd = x.command(ctx, args...)
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.errb
	if err := b.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start etcdctl %s: %v", strings.Join(args, " "), err)
	}
	go func() { b.err = b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() { b.kill(t, syscall.SIGKILL) })
	return b
}

// waitFor polls the output (attempts × etcdctlPoll) until it contains s.
func (b *etcdctlBG) waitFor(s string, attempts int) error {
	for i := 0; i < attempts; i++ {
		if strings.Contains(b.out.String(), s) {
			return nil
		}
		select {
		case <-b.done:
			if strings.Contains(b.out.String(), s) {
				return nil
			}
			return fmt.Errorf("etcdctl %v exited (%v) without printing %q: stdout %q stderr %q", b.cmd.Args, b.err, s, b.out.String(), b.errb.String())
		case <-time.After(etcdctlPoll):
		}
	}
	return fmt.Errorf("etcdctl did not print %q: stdout %q stderr %q", s, b.out.String(), b.errb.String())
}

// wait waits up to d for the process to end by itself.
func (b *etcdctlBG) wait(d time.Duration) error {
	select {
	case <-b.done:
		return b.err
	case <-time.After(d):
		return fmt.Errorf("still running after %s", d)
	}
}

// stop ends it with SIGINT (etcdctl's own orderly end).
func (b *etcdctlBG) stop(t *testing.T) { b.kill(t, syscall.SIGINT) }

// kill signals the process by its PID and waits for it to exit.
func (b *etcdctlBG) kill(t *testing.T, sig syscall.Signal) {
	select {
	case <-b.done:
		b.cancel()
		return
	default:
	}
	_ = b.cmd.Process.Signal(sig)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
	b.cancel()
}

// atoi is strconv.Atoi of digits a regexp matched.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// syncBuffer is a bytes.Buffer safe for a process writing and a test reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
