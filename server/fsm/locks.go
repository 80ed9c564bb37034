package fsm

import (
	"sort"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// waitFor is the lock sibling n must see deleted before it re-checks, nil if
// n holds the lock. An exclusive node waits for the nearest lower lock node
// of either mode; a shared node for the nearest lower exclusive one.
func waitFor(n *node) *node {
	if n.lock == api.LockPermit {
		return permitWaitFor(n) // semaphore.go
	}
	kids := n.parent.lockKids
	i := sort.Search(len(kids), func(i int) bool { return kids[i].seq >= n.seq })
	for j := i - 1; j >= 0; j-- {
		if blocks(kids[j], n) { // rwlock.go
			return kids[j]
		}
	}
	return upgradeWaitFor(n, kids, i) // rwlock.go
}

// waitOn is what lock node n waits for, nil if it holds the lock: its
// predecessor (waitFor), or, while its directory is in lock-delay and n
// did not hold at the release, the directory itself (whose delay's end
// wakes its waiters).
func waitOn(n *node) *node {
	if w := waitFor(n); w != nil {
		return w
	}
	if d := n.parent.delay; d != nil && (n.seq > d.keepSeq || upgraded(n)) { // rwlock.go: an upgrade is a new grant
		return n.parent
	}
	return nil
}

// token is the fencing token of a lock node: its create index under its
// prefix's directory epoch.
func (s *State) token(n *node) uint64 {
	return api.MakeToken(n.tokenEpoch, tokenIndex(n)) // rwlock.go
}

// --- reads ---

// LockState says whether the lock node at path exists, holds its lock, and
// which sibling it waits for otherwise.
func (s *State) LockState(path string) (exists, held bool, waitingFor string, token uint64) {
	n, ok := s.nodes[path]
	if !ok || n.lock == api.LockNone {
		return false, false, "", 0
	}
	if w := waitOn(n); w != nil {
		return true, false, w.path, s.token(n)
	}
	return true, true, "", s.token(n)
}

// LockQueue lists the lock nodes under dir in queue order (at most limit;
// more reports the rest), each with whether it holds and its token.
func (s *State) LockQueue(dir string, limit int) (entries []api.LockEntry, more bool, err *api.Error) {
	n, ok := s.nodes[dir]
	if !ok {
		return nil, false, api.Errorf(api.CodeNoNode, "%s does not exist", dir)
	}
	for i, k := range n.lockKids {
		if i == limit {
			return entries, true, nil
		}
		entries = append(entries, api.LockEntry{Node: k.path, Mode: k.lock, Session: k.owner, Held: waitOn(k) == nil,
			Token: s.token(k), CreateIndex: k.createIndex})
	}
	return entries, false, nil
}

// CheckToken reports whether token is held on the lock dir now, and the
// tokens that hold it. A dir that does not exist holds nothing.
func (s *State) CheckToken(dir string, token uint64) (valid bool, holders []uint64) {
	n, ok := s.nodes[dir]
	if !ok {
		return false, nil
	}
	// The holders are a prefix of the queue: one exclusive node, or the
	// leading shared ones (and the shared ones an upgrade let hold on
	// behind the upgraded node: holding, rwlock.go).
	for _, k := range n.lockKids {
		held, more := holding(k)
		if !more {
			break
		}
		if !held {
			continue
		}
		t := s.token(k)
		holders = append(holders, t)
		valid = valid || t == token || (mutant.On(mutant.CheckAnyGranted) && token < t)
	}
	return valid, holders
}
