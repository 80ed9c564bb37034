package check

import (
	"sync"
	"time"
)

// ServeSample is what one cell said of one prefix in one linearizable
// read of the prefix's state on its leader (the admin prefix op "state"):
// State "serving", "sealed", "staging", "staged" or "" (absent), at the
// prefix's directory epoch as the cell records it. Start and End are the
// read's call and return on the history's clock.
type ServeSample struct {
	Cell, Prefix string
	State        string
	Epoch        uint64
	Index        uint64
	Start, End   time.Duration
}

// PrefixWrite is an acknowledged put of a unique key under a prefix that
// moves and is restored, with its call and return.
type PrefixWrite struct {
	Prefix, Key, Value string
	Call, Return       time.Duration
}

// RestoreEvent is one restore of a cell from a backup: the backup call's
// start and return, the restore's start (the plan) and end (the restored
// cell serving), and the prefixes the directory gives the cell when it is
// restored (the writes under them after the backup are lost; the others
// are not the restored cell's to lose).
type RestoreEvent struct {
	Cell                     string
	Prefixes                 []string
	BackupIndex              uint64
	BackupCall, BackupReturn time.Duration
	Start, End               time.Duration
}

// LeaseClaim is a client's belief that its session is safe: at At its SDK
// reported SessionSafe (or a lease sample while not in jeopardy) with a
// local lease running until Until.
type LeaseClaim struct {
	Worker    string
	Session   uint64
	At, Until time.Duration
	Source    string // "safe-event", "lease-sample"
}

// SessionEnd is a session the service ended: its expiry had committed by
// By (the client was told it expired, or another holder was granted a
// lock only the expiry could free).
type SessionEnd struct {
	Worker  string
	Session uint64
	By      time.Duration
	How     string
}

// MovedHold is a lock held under a prefix while the prefix moved: its
// holder's local lease ran at least until Until (the last lease the holder
// reported before it stopped answering, or the moment it reported the
// lock lost, whichever is first). Grant is when another client's Lock on
// the new cell returned granted (0: none).
type MovedHold struct {
	Lock, Holder, Waiter string
	Until                time.Duration
	Acked                bool // the holder reported the loss at Until
	Grant                time.Duration
	LockDelay            time.Duration
}

// moveRecords are the records of the move, restore and fsync nemeses.
type moveRecords struct {
	mu       sync.Mutex
	serves   []ServeSample
	writes   []PrefixWrite
	restores []RestoreEvent
	claims   []LeaseClaim
	ends     []SessionEnd
	holds    []MovedHold
	side     []ConfigOp // config ops on the moving prefix (cached reads)
	outcomes map[string]int
}

// MoveSnapshot is a copy of the move records.
type MoveSnapshot struct {
	Serves   []ServeSample
	Writes   []PrefixWrite
	Restores []RestoreEvent
	Claims   []LeaseClaim
	Ends     []SessionEnd
	Holds    []MovedHold
	Side     []ConfigOp
	Outcomes map[string]int // the nemeses' outcomes by name ("race-move: second refused" …)
}

func addMove[T any](h *History, list *[]T, v T) {
	h.moves.mu.Lock()
	*list = append(*list, v)
	h.moves.mu.Unlock()
}

func (h *History) AddServe(s ServeSample)       { addMove(h, &h.moves.serves, s) }
func (h *History) AddPrefixWrite(w PrefixWrite) { addMove(h, &h.moves.writes, w) }
func (h *History) AddRestore(r RestoreEvent)    { addMove(h, &h.moves.restores, r) }
func (h *History) AddClaim(c LeaseClaim)        { addMove(h, &h.moves.claims, c) }
func (h *History) AddSessionEnd(e SessionEnd)   { addMove(h, &h.moves.ends, e) }
func (h *History) AddMovedHold(m MovedHold)     { addMove(h, &h.moves.holds, m) }
func (h *History) AddSideConfig(o ConfigOp)     { addMove(h, &h.moves.side, o) }

// AddOutcome counts one outcome of a nemesis (both outcomes of a race are
// accepted and recorded).
func (h *History) AddOutcome(what string) {
	h.moves.mu.Lock()
	if h.moves.outcomes == nil {
		h.moves.outcomes = map[string]int{}
	}
	h.moves.outcomes[what]++
	h.moves.mu.Unlock()
}

// MoveSnapshot copies the move records.
func (h *History) MoveSnapshot() MoveSnapshot {
	m := &h.moves
	m.mu.Lock()
	defer m.mu.Unlock()
	out := MoveSnapshot{
		Serves:   append([]ServeSample(nil), m.serves...),
		Writes:   append([]PrefixWrite(nil), m.writes...),
		Restores: append([]RestoreEvent(nil), m.restores...),
		Claims:   append([]LeaseClaim(nil), m.claims...),
		Ends:     append([]SessionEnd(nil), m.ends...),
		Holds:    append([]MovedHold(nil), m.holds...),
		Side:     append([]ConfigOp(nil), m.side...),
		Outcomes: map[string]int{},
	}
	for k, v := range m.outcomes {
		out.Outcomes[k] = v
	}
	return out
}
