// Package check holds the chaos suite's history (what a run recorded, on
// one clock and in the service's own indices) and the checkers that judge
// it. It knows nothing of processes, namespaces or nemeses (package
// chaos), so each checker is tested on hand-made broken histories.
package check

import (
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
)

// LockObs is one thing the service said about a lock node at a Raft index:
// the node held the lock (Held) or existed and waited (!Held). Sources are
// the service's own replies: a lock/state read (its Index), a children
// listing of the lock (the parent's ChildIndex: the set of lock nodes was
// exactly the listed one at that index, so the holders the lock rules give
// held there).
type LockObs struct {
	Lock   string
	Node   string
	Mode   api.LockMode
	Index  uint64
	Held   bool
	Source string // "lockstate", "children", "holder"
}

// Grant is a grant a client reported, with the service's view of the node
// it was granted on (from a linearizable get of the node).
type Grant struct {
	Lock        string
	Node        string
	Mode        api.LockMode
	Token       uint64
	Session     uint64 // the session the client holds the lock under
	Owner       uint64 // the node's owner, per the service
	CreateIndex uint64 // the node's create index, per the service
	Epoch       uint64 // the prefix's directory epoch (high bits of the token)
	Worker      string
	At          time.Duration // since the run started
}

// Write is one access attempt at the protected resource, accepted or
// refused, in the order the resource decided them: a write (raises the
// lock's mark) or a shared holder's read (checked against it).
type Write struct {
	Seq      uint64
	Lock     string
	Token    uint64
	Session  uint64
	Writer   string
	Read     bool
	Accepted bool // the resource's verdict
	// LiveKnown: the writer is a client of this process, and LiveAfter
	// says whether its lock's Context was still live just after the
	// resource decided (holder processes cannot say: LiveKnown false).
	LiveKnown, LiveAfter bool
	At                   time.Duration
}

// Deletion is the Raft index at which a lock node was deleted, from a data
// watch's deleted event that fired under the leader that applied the
// delete (such an event carries the index of the delete entry; one fired
// by a re-registration after a fail-over carries a later read index and
// is not recorded).
type Deletion struct {
	Lock, Node string
	Index      uint64
}

// Interval is one period during which a client of this process held a
// lock as far as its SDK said: from the grant's return (or the lock's
// Context becoming live again after jeopardy) until its Context was
// cancelled or Unlock was called, both on the History's clock.
type Interval struct {
	Lock, Node, Worker string
	Mode               api.LockMode
	Start, End         time.Duration
}

// Op is one client call of the workload, for counting and for the
// no-majority check. Every call needs a quorum (writes commit, reads take
// a ReadIndex round).
type Op struct {
	Worker string
	Kind   string
	Start  time.Duration
	End    time.Duration
	OK     bool
	Local  bool // not a call to the cell (the resource's fence, a read from the client cache)
	// Detail, for a slow traced write, is its attempts (tracedOp): where
	// each went, when, and how it ended.
	Detail string
}

// ConfigKind is a config operation.
type ConfigKind string

const (
	ConfigGet ConfigKind = "get"
	ConfigPut ConfigKind = "put" // unconditional
	ConfigCAS ConfigKind = "cas" // put at an expected version
	// ConfigEra starts a key's history after a restore (SplitRestoreEras):
	// the key is then in the backup's state, unknown to the checker.
	ConfigEra ConfigKind = "era"
)

// Outcome of a call.
type Outcome int

const (
	OutcomeOK      Outcome = iota // acknowledged
	OutcomeFail                   // definitely not applied (version_mismatch, a read that failed)
	OutcomeUnknown                // may or may not have been applied
)

// ConfigOp is one config get, put or compare-and-set, for porcupine.
type ConfigOp struct {
	Client  int
	Key     string
	Kind    ConfigKind
	Value   string // written (put, cas)
	Expect  uint64 // cas
	Call    time.Duration
	Return  time.Duration
	Outcome Outcome
	// Read result (get) and written version (put, cas acknowledged).
	Exists   bool
	GotValue string
	Version  uint64
	Err      string // why it failed, if it did
}

// AckedWrite is a put of a unique key the service acknowledged.
type AckedWrite struct {
	Key, Value string
}

// SessionLoss is a session of a healthy in-process client that ended
// without being closed.
type SessionLoss struct {
	Worker  string
	Session uint64
	At      time.Duration
	Err     string
}

// Window is a period of the run, since its start.
type Window struct {
	Start, End time.Duration
	What       string
}

// Violation is one thing a checker found wrong.
type Violation struct {
	Checker string
	Detail  string
}

// History is everything a run records, safe for concurrent use.
type History struct {
	start time.Time

	mu          sync.Mutex
	lockObs     []LockObs
	grants      []Grant
	writes      []Write
	deletions   []Deletion
	intervals   []Interval
	ops         []Op
	config      []ConfigOp
	acked       []AckedWrite
	losses      []SessionLoss
	noQuorum    []Window
	violations  []Violation // found while running (churn, quorum probes, recovery)
	jeopardies  int
	staleWrites int
	waiterGrant map[string][]time.Duration // liveness: grants per waiter
	checked     map[string]int             // checks made while running, by checker

	moves moveRecords // the move, restore and fsync nemeses' records (history_moves.go)
	sems  semRecords  // the semaphore workload's permits (history_semaphore.go)
}

// NewHistory starts an empty history whose clock starts now.
func NewHistory() *History {
	return &History{start: time.Now(), waiterGrant: map[string][]time.Duration{}, checked: map[string]int{}}
}

// Now is the time since the history started (monotonic).
func (h *History) Now() time.Duration { return time.Since(h.start) }

// Start is when the history's clock started.
func (h *History) Start() time.Time { return h.start }

func (h *History) AddLockObs(o LockObs) { add(h, &h.lockObs, o) }

func (h *History) AddGrant(g Grant) {
	h.mu.Lock()
	h.grants = append(h.grants, g)
	h.waiterGrant[g.Worker] = append(h.waiterGrant[g.Worker], g.At)
	h.mu.Unlock()
}

// AddProgress records that waiter made progress (a grant) at at, for the
// liveness checker, without a full grant record.
func (h *History) AddProgress(waiter string, at time.Duration) {
	h.mu.Lock()
	h.waiterGrant[waiter] = append(h.waiterGrant[waiter], at)
	h.mu.Unlock()
}

func (h *History) AddWrite(w Write) { add(h, &h.writes, w) }

func (h *History) AddDeletion(d Deletion) { add(h, &h.deletions, d) }

func (h *History) AddInterval(iv Interval) { add(h, &h.intervals, iv) }

func (h *History) AddOp(o Op) { add(h, &h.ops, o) }

func (h *History) AddConfig(o ConfigOp) { add(h, &h.config, o) }

func (h *History) AddAcked(a AckedWrite) { add(h, &h.acked, a) }

func (h *History) AddLoss(l SessionLoss) { add(h, &h.losses, l) }

func (h *History) AddNoQuorum(w Window) { add(h, &h.noQuorum, w) }

func (h *History) AddViolation(checker, detail string) {
	h.mu.Lock()
	h.violations = append(h.violations, Violation{checker, detail})
	h.mu.Unlock()
}

// Checked counts one check made while running (its violation, if any, is
// recorded with AddViolation under the same checker name).
func (h *History) Checked(checker string) {
	h.mu.Lock()
	h.checked[checker]++
	h.mu.Unlock()
}

func (h *History) AddJeopardy() {
	h.mu.Lock()
	h.jeopardies++
	h.mu.Unlock()
}

func (h *History) AddStaleWrite() {
	h.mu.Lock()
	h.staleWrites++
	h.mu.Unlock()
}

// Snapshot is a copy of a history's records, for the checkers.
type Snapshot struct {
	LockObs     []LockObs
	Grants      []Grant
	Writes      []Write
	Deletions   []Deletion
	Intervals   []Interval
	Ops         []Op
	Config      []ConfigOp
	Acked       []AckedWrite
	Losses      []SessionLoss
	NoQuorum    []Window
	Violations  []Violation
	Jeopardies  int
	StaleWrites int
	WaiterGrant map[string][]time.Duration
	Checked     map[string]int
}

// Snapshot copies the records.
func (h *History) Snapshot() Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	checked := make(map[string]int, len(h.checked))
	for k, v := range h.checked {
		checked[k] = v
	}
	wg := make(map[string][]time.Duration, len(h.waiterGrant))
	for k, v := range h.waiterGrant {
		wg[k] = append([]time.Duration(nil), v...)
	}
	return Snapshot{
		LockObs:     append([]LockObs(nil), h.lockObs...),
		Grants:      append([]Grant(nil), h.grants...),
		Writes:      append([]Write(nil), h.writes...),
		Deletions:   append([]Deletion(nil), h.deletions...),
		Intervals:   append([]Interval(nil), h.intervals...),
		Ops:         append([]Op(nil), h.ops...),
		Config:      append([]ConfigOp(nil), h.config...),
		Acked:       append([]AckedWrite(nil), h.acked...),
		Losses:      append([]SessionLoss(nil), h.losses...),
		NoQuorum:    append([]Window(nil), h.noQuorum...),
		Violations:  append([]Violation(nil), h.violations...),
		Jeopardies:  h.jeopardies,
		StaleWrites: h.staleWrites,
		WaiterGrant: wg,
		Checked:     checked,
	}
}

// add appends v to one of h's lists.
func add[T any](h *History, list *[]T, v T) {
	h.mu.Lock()
	*list = append(*list, v)
	h.mu.Unlock()
}
