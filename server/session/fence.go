package session

// A new leader's cache fence, per node. A client may serve a node from its
// cache until one cache window after its last renewal (api.CacheWindowFor);
// a new leader does not know which renewals the old one answered, so a
// node a session may cache under an earlier leader must not change until
// that session has seen this leadership's epoch (and flushed its cache)
// or one cache window has passed since this leadership started. Which
// nodes a session may cache is committed (fsm cachepaths.go: the nodes the
// last epoch that granted it any granted it), so a change waits only for
// the sessions whose record holds its node, not for every caching client
// of the cell: an unreachable cacher of one config value holds that value,
// not the lock path nor anybody else's writes. A session that caches but
// has no record (cached before records existed) may cache anything.

import (
	"context"
	"strings"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/fsm"
)

// fence is a leadership's record of the sessions that may still serve
// from a cache filled under an earlier leader: each record's path to the
// sessions holding it, and the sessions that may cache anything. A session
// leaves it when it sees this epoch, ends, or its fence time passes.
type fence struct {
	byPath map[string][]uint64
	all    []uint64
	// allUntil holds every node until then: the first leaderships of a
	// restored cell, whose clients may cache under sessions its backup
	// never had (HoldAll).
	allUntil time.Time
	// wake is closed (and replaced) whenever a fenced session leaves.
	wake chan struct{}
}

// startFenceLocked builds the fence from the sessions at a leadership's
// start (now): each caching session is fenced until now plus its cache
// window.
func (m *Manager) startFenceLocked(now time.Time, sessions []fsm.SessionInfo) {
	m.fence = fence{byPath: map[string][]uint64{}, wake: make(chan struct{})}
	m.unfenced, m.fenceBy = 0, now
	for _, s := range sessions {
		l := m.leases[s.ID]
		if l == nil || !s.Caches {
			continue
		}
		l.fenceBy = now.Add(min(m.cfg.CacheWindow, api.CacheWindowFor(l.dur)))
		m.fenceBy = later(m.fenceBy, l.fenceBy)
		m.unfenced++
		if s.CachedEpoch == 0 {
			m.fence.all = append(m.fence.all, s.ID)
			continue
		}
		for _, p := range s.Cached {
			m.fence.byPath[p] = append(m.fence.byPath[p], s.ID)
		}
	}
	m.fenced = m.unfenced == 0
}

// Scope is what a change touches: nodes by path, or (Under) every node at
// or under a prefix (a seal).
type Scope struct {
	Paths []string
	Under string
}

// fenceUntilLocked is when the fence for scope ends: the latest fence time
// of the sessions that may hold one of its nodes from an earlier leader's
// grant and have not yet seen this epoch. Zero: it has ended.
func (m *Manager) fenceUntilLocked(scope Scope) time.Time {
	if m.fenced {
		return time.Time{}
	}
	now := m.cfg.Now()
	var until time.Time
	if now.Before(m.fence.allUntil) {
		until = m.fence.allUntil
	}
	hold := func(id uint64) {
		if l := m.leases[id]; l != nil && !l.sawEpoch && now.Before(l.fenceBy) {
			until = later(until, l.fenceBy)
		}
	}
	for _, id := range m.fence.all {
		hold(id)
	}
	for _, p := range scope.Paths {
		for _, id := range m.fence.byPath[p] {
			hold(id)
		}
	}
	if scope.Under != "" {
		for p, ids := range m.fence.byPath {
			if scope.Under == "/" || p == scope.Under || strings.HasPrefix(p, scope.Under+"/") {
				for _, id := range ids {
					hold(id)
				}
			}
		}
	}
	if !now.Before(m.fenceBy) {
		m.fenced = true
	}
	return until
}

// FencedFor reports whether a change of scope would pass the fence at
// once. Until it does, nobody is granted its nodes: an invalidation a
// change then sends would have a deadline a whole cache window later
// still.
func (m *Manager) FencedFor(scope Scope) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.active && m.fenceUntilLocked(scope).IsZero()
}

// Fenced reports whether the whole fence has passed: every caching session
// has seen this epoch, ended, or run past its cache window.
func (m *Manager) Fenced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active && !m.fenced && !m.cfg.Now().Before(m.fenceBy) {
		m.fenced = true
	}
	return m.active && m.fenced
}

// WaitFencedFor waits until no client can serve a node of scope from a
// cache filled under an earlier leader. It fails if leadership is lost or
// ctx ends first.
func (m *Manager) WaitFencedFor(ctx context.Context, scope Scope) error {
	for {
		m.mu.Lock()
		if !m.active {
			m.mu.Unlock()
			return api.Errorf(api.CodeNotLeader, "leadership lost")
		}
		until := m.fenceUntilLocked(scope)
		if until.IsZero() {
			m.mu.Unlock()
			return nil
		}
		left := until.Sub(m.cfg.Now())
		wake, stopped := m.fence.wake, m.stopped
		m.mu.Unlock()
		if !sleepUntil(ctx, left, wake, stopped) {
			return api.Errorf(api.CodeUnavailable, "waiting for clients to learn of the new leader: %v", ctx.Err())
		}
	}
}

// WaitFenced waits for the whole fence (WaitFencedFor every node).
func (m *Manager) WaitFenced(ctx context.Context) error {
	return m.WaitFencedFor(ctx, Scope{Under: "/"})
}

// sawEpochLocked records that l's client has seen this leadership's
// epoch (or that l ended), and wakes the fence's waiters.
func (m *Manager) sawEpochLocked(l *lease) {
	if l.sawEpoch {
		return
	}
	l.sawEpoch = true
	m.unfenced--
	if m.unfenced <= 0 {
		m.fenced = true
	}
	close(m.fence.wake)
	m.fence.wake = make(chan struct{})
}

// MayGrant reports whether session id may be granted path to cache: it
// no longer serves anything an earlier leader granted (it has seen this
// epoch, or its cache window since this leadership's start has passed),
// and no other session may still serve path from such a grant.
func (m *Manager) MayGrant(id uint64, path string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[id]
	if !m.active || l == nil {
		return false
	}
	if !l.sawEpoch && m.cfg.Now().Before(l.fenceBy) {
		return false
	}
	return m.fenceUntilLocked(Scope{Paths: []string{path}}).IsZero()
}

// Stopped returns a channel closed when the leadership of epoch ends
// (closed already if it is not the running one).
func (m *Manager) Stopped(epoch uint64) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.active || m.epoch != epoch {
		c := make(chan struct{})
		close(c)
		return c
	}
	return m.stopped
}

// HoldAll holds every change, and every grant, for the longest cache
// window from now: a restored cell's first leaderships cannot know the
// sessions its clients opened after the backup was taken, which may
// still serve from their caches.
func (m *Manager) HoldAll() {
	if mutant.On(mutant.RestoreNoHold) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.active {
		return
	}
	m.fence.allUntil = m.cfg.Now().Add(m.cfg.CacheWindow)
	m.fenceBy = later(m.fenceBy, m.fence.allUntil)
	m.fenced = false
}
