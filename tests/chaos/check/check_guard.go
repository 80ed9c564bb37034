package check

import (
	"fmt"
	"sort"
	"time"
)

// GuardedWrite is one write sent through a transaction guarded by a lock
// token ("commit only while token holds the lock": Mutex.Guard), accepted
// or refused. Stale: sent after the holder's Unlock had returned (the
// token no longer held when it was sent, as a holder paused past its
// release would send it).
type GuardedWrite struct {
	Writer   string
	Lock     string
	Token    uint64
	Index    uint64 // the Raft index it committed at (accepted only)
	Accepted bool
	Stale    bool
	At       time.Duration
}

// CheckGuarded checks the guarded writes of one lock: in commit order the
// accepted writes' tokens never go down (no superseded holder's write
// commits after its successor's), and no write sent after its holder's
// release is accepted (the token did not hold when it committed). It
// returns how many writes it checked.
func CheckGuarded(ws []GuardedWrite) (int, []Violation) {
	var vs []Violation
	acc := make([]GuardedWrite, 0, len(ws))
	for _, w := range ws {
		if !w.Accepted {
			continue
		}
		acc = append(acc, w)
		if w.Stale {
			vs = append(vs, Violation{"guarded-write", fmt.Sprintf("%s's write with token %d on %s, sent at %v after its release, committed at index %d",
				w.Writer, w.Token, w.Lock, w.At, w.Index)})
		}
	}
	sort.SliceStable(acc, func(i, j int) bool { return acc[i].Index < acc[j].Index })
	for i := 1; i < len(acc); i++ {
		if p, w := acc[i-1], acc[i]; w.Lock == p.Lock && w.Token < p.Token {
			vs = append(vs, Violation{"guarded-write", fmt.Sprintf("%s's write with token %d committed at index %d after %s's with token %d at %d: a superseded holder wrote",
				w.Writer, w.Token, w.Index, p.Writer, p.Token, p.Index)})
		}
	}
	return len(ws), vs
}
