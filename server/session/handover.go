package session

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/fsm"
)

// A planned hand-over (server/fsm handover.go): the leader stops renewing
// leases, measures each session's silence, and commits it before Raft
// moves the leadership, so that the next leader charges it instead of
// granting a full lease. Renewals wait meanwhile (at most
// MaxHandOverHold, in the caller's goroutine, parked KeepAlives too) and
// nothing is expired here (the record decides it); a hand-over that did
// not happen is cancelled by a committed empty hand_over, and only then
// is the manager thawed.

// MaxHandOverHold bounds how long a renewal waits for a hand-over to end
// before it is answered unavailable (its client retries; its lease, which
// it counts from an earlier send, is not at stake).
const MaxHandOverHold = 5 * time.Second

// Silence is one session's silence at a hand-over.
type Silence struct {
	Session  uint64
	SilentMS int64
}

// HandOver freezes the manager for a planned hand-over: no lease is
// renewed from now until Thaw or the end of the leadership. It returns
// the leadership's epoch and the silence of each session, the time since
// the renewal its lease counts from (rounded down: the next leader
// charges no more), at most fsm.MaxHandOverSessions of them, the most
// silent first. Refused unavailable while another hand-over holds it,
// not_leader when it does not run.
func (m *Manager) HandOver() (uint64, []Silence, error) {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.active {
		return 0, nil, api.Errorf(api.CodeNotLeader, "not the leader")
	}
	if m.frozen {
		return 0, nil, api.Errorf(api.CodeUnavailable, "a leadership hand-over is in progress")
	}
	m.frozen, m.thawed = true, make(chan struct{})
	out := make([]Silence, 0, len(m.leases))
	for id, l := range m.leases {
		silent := l.dur - l.expiry.Sub(now)
		if l.expiring {
			silent = l.dur
		}
		out = append(out, Silence{Session: id, SilentMS: min(max(silent, 0), l.dur).Milliseconds()})
	}
	slices.SortFunc(out, func(a, b Silence) int {
		if c := cmp.Compare(b.SilentMS, a.SilentMS); c != 0 {
			return c
		}
		return cmp.Compare(a.Session, b.Session)
	})
	if len(out) > fsm.MaxHandOverSessions {
		out = out[:fsm.MaxHandOverSessions]
	}
	return m.epoch, out, nil
}

// Thaw ends a hand-over that did not happen (its cancel committed under
// epoch): renewals go on.
func (m *Manager) Thaw(epoch uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active && m.epoch == epoch {
		m.thawLocked()
	}
}

// thawLocked releases the renewals waiting for a hand-over.
func (m *Manager) thawLocked() {
	if m.frozen {
		m.frozen = false
		close(m.thawed)
	}
}

// HandingOver reports whether a hand-over holds renewals: its record, if
// it committed, is still in force (no renewal since its silences were
// measured), so another transfer needs no record of its own.
func (m *Manager) HandingOver() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.active && m.frozen
}

// awaitThaw waits, at most MaxHandOverHold, while a hand-over holds
// renewals (until it is thawed, the leadership ends or ctx does), and
// returns how long it waited: the caller's long poll is shortened by it,
// so that its client's attempt does not run out.
func (m *Manager) awaitThaw(ctx context.Context) time.Duration {
	if mutant.On(mutant.HandOverRenews) {
		return 0 // broken: renewals go on during a hand-over
	}
	m.mu.Lock()
	frozen, thawed, stopped := m.frozen, m.thawed, m.stopped
	m.mu.Unlock()
	if !frozen {
		return 0
	}
	start := time.Now()
	t := time.NewTimer(MaxHandOverHold)
	defer t.Stop()
	select {
	case <-thawed:
	case <-stopped:
	case <-ctx.Done():
	case <-t.C:
	}
	return time.Since(start)
}

// frozenLocked refuses a renewal while a hand-over holds them.
func (m *Manager) frozenLocked() error {
	if m.frozen && !mutant.On(mutant.HandOverRenews) {
		return api.Errorf(api.CodeUnavailable, "leadership is being handed over; retry")
	}
	return nil
}
