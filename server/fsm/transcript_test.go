package fsm

// Transcripts of the state machine (testdata/*.txt): each file is a
// story told in commands applied to real States, one per cell, through
// Apply at increasing indices exactly as a cell applies its log, with
// what each command returned, the watch events it fired and the lock
// queues it touched. The commands are listed in transcriptCommands;
// the printing is in transcript_print_test.go. Regenerate the expected
// output with `go test ./server/fsm -run TestTranscripts -rewrite` and
// read the diff before committing it.

import (
	"bytes"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestTranscripts runs every testdata/*.txt transcript.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			w := &world{t: t, cells: map[string]*tcell{}}
			runDD(t, f, w.run)
		})
	}
}

// world is the cells of one transcript; commands go to the current one
// (the last named by `cell`) unless they name another with cell=.
type world struct {
	t     *testing.T
	cells map[string]*tcell
	cur   string
}

// tcell is one cell: its state, behind the tests' harness (which checks
// the invariants after every apply), and the names the transcript gave
// its sessions.
type tcell struct {
	name   string
	h      *harness
	term   uint64
	ids    map[string]uint64 // session name → id
	names  map[uint64]string // id → name
	tokens map[string]uint64 // "session dir" → token of its last lock node there
	seals  map[string]Result // prefix → the result of its seal here
}

type transcriptCmd func(w *world, c *ddCase) string

// transcriptCommands is every command a transcript may use.
var transcriptCommands = map[string]transcriptCmd{
	"cell":         (*world).cmdCell,
	"leader-start": (*world).cmdLeaderStart,
	"open":         (*world).cmdOpen,
	"keepalive":    (*world).cmdKeepAlive,
	"tick":         (*world).cmdTick,
	"expire":       (*world).cmdExpire,
	"close":        (*world).cmdClose,
	"create":       (*world).cmdCreate,
	"put":          (*world).cmdPut,
	"delete":       (*world).cmdDelete,
	"lock":         (*world).cmdLock,
	"unlock":       (*world).cmdUnlock,
	"end-delay":    (*world).cmdEndDelay,
	"check":        (*world).cmdCheck,
	"ensure":       (*world).cmdEnsure,
	"seal":         (*world).cmdSeal,
	"stage":        (*world).cmdStage,
	"serve":        (*world).cmdServe,
	"unseal":       (*world).cmdUnseal,
	"drop":         (*world).cmdDrop,
	"queue":        (*world).cmdQueue,
	"nodes":        (*world).cmdNodes,
	"delays":       (*world).cmdDelays,
	"sessions":     (*world).cmdSessions,
	"restart":      (*world).cmdRestart,
	"usage":        (*world).cmdUsage,
}

func (w *world) run(c *ddCase) string {
	f, ok := transcriptCommands[c.Name]
	if !ok {
		w.t.Fatalf("%s: unknown command %q", c.Pos, c.Name)
	}
	if c.Name != "cell" && w.cur == "" {
		w.t.Fatalf("%s: no cell yet: start with `cell name=...`", c.Pos)
	}
	return f(w, c)
}

// --- arguments ---

func (w *world) str(c *ddCase, key string) string {
	v, ok := c.Arg(key)
	if !ok || v == "" {
		w.t.Fatalf("%s: %s needs %s=", c.Pos, c.Name, key)
	}
	return v
}

func (w *world) num(c *ddCase, key string, def uint64) uint64 {
	v, ok := c.Arg(key)
	if !ok {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		w.t.Fatalf("%s: %s=%q: %v", c.Pos, key, v, err)
	}
	return n
}

func (w *world) flag(c *ddCase, key string) bool {
	_, ok := c.Arg(key)
	return ok
}

// cell is the cell the command names (cell=), else the current one.
func (w *world) cell(c *ddCase) *tcell {
	name := w.cur
	if v, ok := c.Arg("cell"); ok {
		name = v
	}
	tc, ok := w.cells[name]
	if !ok {
		w.t.Fatalf("%s: no cell %q", c.Pos, name)
	}
	return tc
}

// session is the id of the session the command names with key.
func (w *world) session(c *ddCase, tc *tcell, key string) uint64 {
	name := w.str(c, key)
	id, ok := tc.ids[name]
	if !ok {
		w.t.Fatalf("%s: cell %s has no session named %q", c.Pos, tc.name, name)
	}
	return id
}

// --- applying ---

// apply applies cmd on tc and prints its result, its events and the
// lock queues it touched; detail prints what a success returned.
func (w *world) apply(tc *tcell, cmd Command, detail func(r Result) string) string {
	before := tc.lockDirs()
	r := tc.h.apply(cmd)
	var b strings.Builder
	if r.Err != nil {
		b.WriteString(errLine(r.Err))
	} else {
		b.WriteString("ok @" + strconv.FormatUint(r.Index, 10))
		if d := detail(r); d != "" {
			b.WriteString(": " + d)
		}
		b.WriteString("\n")
	}
	b.WriteString(tc.events(tc.h.changes))
	for _, dir := range tc.touchedDirs(before, tc.h.changes) {
		b.WriteString(tc.queue(dir))
	}
	return b.String()
}

// lockDirs are the directories with lock nodes or a lock-delay now.
func (tc *tcell) lockDirs() map[string]bool {
	out := map[string]bool{}
	for p, n := range tc.h.s.nodes {
		if len(n.lockKids) > 0 || n.delay != nil {
			out[p] = true
		}
	}
	for _, d := range tc.h.s.LockDelays() {
		out[d.Dir] = true
	}
	return out
}

// touchedDirs are the lock directories (before or after) whose children
// or lock-delay the changes touched, in path order.
func (tc *tcell) touchedDirs(before map[string]bool, changes []Change) []string {
	after := tc.lockDirs()
	seen := map[string]bool{}
	var out []string
	for _, ch := range changes {
		lockish := ch.Type == ChangeLockDelay || ch.Type == ChangeLockDelayEnded
		if seen[ch.Path] || !(lockish || ch.Type == ChangeChildren && (before[ch.Path] || after[ch.Path])) {
			continue
		}
		seen[ch.Path] = true
		out = append(out, ch.Path)
	}
	sort.Strings(out)
	return out
}

// --- cells and sessions ---

// cmdCell makes a cell (its first leader starts; prefix= with epoch=
// makes it serve that prefix) or switches to an existing one.
func (w *world) cmdCell(c *ddCase) string {
	name := w.str(c, "name")
	w.cur = name
	if _, ok := w.cells[name]; ok {
		return "now on cell " + name
	}
	tc := &tcell{name: name, h: newHarness(w.t), ids: map[string]uint64{}, names: map[uint64]string{},
		tokens: map[string]uint64{}, seals: map[string]Result{}}
	w.cells[name] = tc
	out := "cell " + name + ", now current\n" + w.leaderStart(tc)
	if p, ok := c.Arg("prefix"); ok {
		r := tc.h.apply(ensureCmd(p, w.num(c, "epoch", 1)))
		out += "@" + strconv.FormatUint(r.Index, 10) + " ensure_prefix " + p + ": serving, directory epoch " + strconv.FormatUint(r.Epoch, 10) + "\n"
	}
	return out
}

func (w *world) leaderStart(tc *tcell) string {
	tc.term++
	r := tc.h.apply(Command{Op: OpLeaderStart, ReplicaID: 1, Term: tc.term})
	if r.Err != nil {
		return errLine(r.Err)
	}
	return "@" + strconv.FormatUint(r.Index, 10) + " leader_start: leader epoch " + strconv.FormatUint(r.Epoch, 10) + "\n"
}

func (w *world) cmdLeaderStart(c *ddCase) string { return w.leaderStart(w.cell(c)) }

// cmdRestart replaces the cell's state by one read back from its
// snapshot (a replica restarting, or a follower catching up), and says
// whether the restored state writes the same snapshot again.
func (w *world) cmdRestart(c *ddCase) string {
	tc := w.cell(c)
	snap := tc.h.snap()
	tc.h = harnessOn(w.t, restore(w.t, snap))
	same := "the same"
	if !bytes.Equal(tc.h.snap(), snap) {
		same = "a different"
	}
	return "restored from its snapshot at @" + strconv.FormatUint(tc.h.s.Index(), 10) + "; it writes " + same + " snapshot\n"
}

// cmdOpen opens session s= (lease= ms; nonce=, the client's name for
// this open, which a retry repeats; tenant= and its quota).
func (w *world) cmdOpen(c *ddCase) string {
	tc := w.cell(c)
	name := w.str(c, "s")
	cmd := Command{Op: OpOpenSession, LeaseMS: int64(w.num(c, "lease", 0))}
	cmd.Nonce, _ = c.Arg("nonce")
	w.tenant(c, &cmd)
	return w.apply(tc, cmd, func(r Result) string {
		out := "session " + name + " = " + strconv.FormatUint(r.Session, 10)
		tc.ids[name] = r.Session
		if first, ok := tc.names[r.Session]; ok {
			return out + ", the session " + first + " is"
		}
		tc.names[r.Session] = name
		return out + ", lease " + strconv.FormatInt(r.LeaseMS, 10) + " ms"
	})
}

// tenant sets the command's tenant (tenant=) and its quota as the
// directory would carry it (quota-sessions=, quota-nodes=, quota-bytes=;
// a field left out is the default quota's).
func (w *world) tenant(c *ddCase, cmd *Command) {
	cmd.Tenant, _ = c.Arg("tenant")
	q := api.Quota{Sessions: int(w.num(c, "quota-sessions", 0)), Nodes: int(w.num(c, "quota-nodes", 0)),
		Bytes: int64(w.num(c, "quota-bytes", 0))}
	if q != (api.Quota{}) {
		cmd.Quota = &q
	}
}

// cmdKeepAlive: the session renewed under the current leader (confirm).
// epoch= the leader epoch the confirm was proposed under, default the
// current one.
func (w *world) cmdKeepAlive(c *ddCase) string {
	tc := w.cell(c)
	id := w.session(c, tc, "s")
	cmd := Command{Op: OpConfirm, Epoch: w.num(c, "epoch", tc.h.s.Epoch()), Sessions: []uint64{id}}
	return w.apply(tc, cmd, func(Result) string {
		return "session " + tc.names[id] + " renewed under leader epoch " + strconv.FormatUint(cmd.Epoch, 10)
	})
}

// cmdTick: the leader records that it has led for ms= (leader_tick;
// epoch= the leader epoch it ticks under, default the current one).
func (w *world) cmdTick(c *ddCase) string {
	tc := w.cell(c)
	cmd := Command{Op: OpLeaderTick, Epoch: w.num(c, "epoch", tc.h.s.Epoch()), ElapsedMS: int64(w.num(c, "ms", 0))}
	return w.apply(tc, cmd, func(Result) string {
		return "the leader of epoch " + strconv.FormatUint(cmd.Epoch, 10) + " has led " + strconv.FormatInt(tc.h.s.leaderElapsedMS, 10) + " ms (recorded)"
	})
}

// cmdExpire: the leader's session manager expires s= (epoch= the leader
// epoch it decided under, default the current one; at= its clock, ms).
func (w *world) cmdExpire(c *ddCase) string {
	tc := w.cell(c)
	id := w.session(c, tc, "s")
	cmd := expireCmd(id, w.num(c, "epoch", tc.h.s.Epoch()))
	cmd.AtMS = int64(w.num(c, "at", 0))
	return w.apply(tc, cmd, func(Result) string { return "session " + tc.names[id] + " expired" })
}

// cmdClose: the client closes session s=.
func (w *world) cmdClose(c *ddCase) string {
	tc := w.cell(c)
	id := w.session(c, tc, "s")
	cmd := closeCmd(id)
	cmd.AtMS = int64(w.num(c, "at", 0))
	return w.apply(tc, cmd, func(Result) string { return "session " + tc.names[id] + " closed" })
}
