package fsm

import (
	"fmt"
	"strings"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/lockservice/lockd/api"
)

// checkUsage verifies each tenant's usage against the sessions and nodes.
func (s *State) checkUsage() error {
	want := map[string]usage{}
	for _, sess := range s.sessions {
		if sess.tenant != "" {
			u := want[sess.tenant]
			u.sessions++
			want[sess.tenant] = u
		}
	}
	for _, n := range s.nodes {
		if n.tenant != "" {
			u := want[n.tenant]
			u.nodes++
			u.bytes += nodeBytes(n)
			want[n.tenant] = u
		}
	}
	if len(want) != len(s.tenants) {
		return fmt.Errorf("usage kept for %d tenants, %d hold something", len(s.tenants), len(want))
	}
	for t, u := range want {
		if got := s.tenants[t]; got == nil || *got != u {
			return fmt.Errorf("tenant %s usage %+v, holds %+v", t, got, u)
		}
	}
	return nil
}

// CheckInvariants verifies the structure's internal consistency. Tests and
// fuzzers call it after every apply. It checks each family of invariants
// in turn and returns the first one broken.
func (s *State) CheckInvariants() error {
	for _, check := range []func() error{
		s.checkBytes,
		s.checkUsage,
		s.checkCached,
		s.checkLockDelays,
		s.checkTree,
		s.checkOpens,
		s.checkSessionEphemerals,
		s.checkContainers, // container.go
		s.checkRWLocks,    // rwlock.go
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// checkBytes verifies the byte count against the nodes.
func (s *State) checkBytes() error {
	var total int64
	for _, n := range s.nodes {
		total += nodeBytes(n)
	}
	if total != s.bytes {
		return fmt.Errorf("byte count %d, the nodes hold %d", s.bytes, total)
	}
	return nil
}

// checkTree verifies the tree from the root: every node linked and indexed
// (checkSubtree), and no node indexed that the tree does not reach.
func (s *State) checkTree() error {
	count := 0
	if err := s.checkSubtree(s.root, &count); err != nil {
		return err
	}
	if count != len(s.nodes) {
		return fmt.Errorf("%d nodes reachable, %d indexed", count, len(s.nodes))
	}
	return nil
}

// checkSubtree verifies n's children, each one's own fields (checkNodeFields)
// and their subtrees, then n's lock order; count counts the nodes reached.
func (s *State) checkSubtree(n *node, count *int) error {
	for i, k := range n.children() {
		*count++
		if k.parent != n || api.Parent(k.path) != n.path || s.nodes[k.path] != k {
			return fmt.Errorf("child %s of %s is mislinked", k.path, n.path)
		}
		if i > 0 && n.children()[i-1].path >= k.path {
			return fmt.Errorf("children of %s out of order at %s", n.path, k.path)
		}
		if err := s.checkNodeFields(k); err != nil {
			return err
		}
		if err := s.checkSubtree(k, count); err != nil {
			return err
		}
	}
	return checkLockOrder(n)
}

// checkNodeFields verifies one node's lock-delays and, for an ephemeral, its
// owner and that it has no children.
func (s *State) checkNodeFields(k *node) error {
	if d := k.delay; d != nil {
		if err := s.checkDelayRange(k.path, d, k.nextSeq); err != nil {
			return err
		}
	}
	if k.lockDelayMS != 0 && (k.lock == api.LockNone || k.lockDelayMS < 0 || int64(k.lockDelayMS) > api.MaxLockDelay.Milliseconds()) {
		return fmt.Errorf("node %s has lock-delay %d ms", k.path, k.lockDelayMS)
	}
	if k.ephemeral && k.delay != nil && !mutant.On(mutant.EphDelay) {
		return fmt.Errorf("ephemeral %s holds a lock-delay", k.path)
	}
	if k.ephemeral {
		sess, ok := s.sessions[k.owner]
		if !ok {
			return fmt.Errorf("ephemeral %s owned by dead session %d", k.path, k.owner)
		}
		if _, ok := sess.ephemerals[k.path]; !ok {
			return fmt.Errorf("ephemeral %s missing from session %d", k.path, k.owner)
		}
		if k.numChildren() > 0 {
			return fmt.Errorf("ephemeral %s has children", k.path)
		}
	}
	return nil
}

// checkLockOrder verifies that n's lock nodes are exactly its lock
// children, in sequence order.
func checkLockOrder(n *node) error {
	locks := 0
	for _, k := range n.children() {
		if k.lock != api.LockNone {
			locks++
		}
	}
	if locks != len(n.lockKids) {
		return fmt.Errorf("%s has %d lock children but %d in order", n.path, locks, len(n.lockKids))
	}
	for i := 1; i < len(n.lockKids); i++ {
		if n.lockKids[i-1].seq >= n.lockKids[i].seq {
			return fmt.Errorf("%s lock order broken", n.path)
		}
	}
	return checkPermitKids(n) // semaphore.go
}

// checkOpens verifies the open-nonce window: within its limit, and the
// nonce map exactly the window's latest opens.
func (s *State) checkOpens() error {
	if len(s.openOrder) > api.MaxOpenNonces {
		return fmt.Errorf("%d open nonces remembered, limit %d", len(s.openOrder), api.MaxOpenNonces)
	}
	last := make(map[string]uint64, len(s.openOrder))
	for _, o := range s.openOrder {
		last[o.nonce] = o.session
	}
	if len(last) != len(s.opens) {
		return fmt.Errorf("%d open nonces mapped, %d in the window", len(s.opens), len(last))
	}
	for n, id := range last {
		if s.opens[n] != id {
			return fmt.Errorf("open nonce %q maps to session %d, window says %d", n, s.opens[n], id)
		}
	}
	return nil
}

// checkSessionEphemerals verifies that every session owns the ephemerals
// it lists.
func (s *State) checkSessionEphemerals() error {
	for id, sess := range s.sessions {
		for p := range sess.ephemerals {
			if n, ok := s.nodes[p]; !ok || n.owner != id || !strings.HasPrefix(p, "/") {
				return fmt.Errorf("session %d lists %s it does not own", id, p)
			}
		}
	}
	return nil
}
