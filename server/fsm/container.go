package fsm

// Container directories. A lock recipe (mutex, election, semaphore)
// creates its lock node with make_parents and Container set: the
// ancestors that create makes are containers, and the state machine
// deletes a container in the same apply that removes its last child (a
// delete, a session's end), then its parent if that is a container left
// empty, up the path. An explicit create of a directory (Container
// unset) stays persistent, and a directory that exists is never made a
// container.
//
// Three rules keep this safe:
//
//   - A lock-delay lives on its directory: a container in lock-delay is
//     not deleted when it empties; end_lock_delay deletes it then, if it
//     is still empty (endLockDelay).
//
//   - Sequence numbers never go back. The state keeps containerSeq: at
//     least the sequence counter (nextSeq) of every container deleted
//     so far (removeNode folds each one's in as it goes, whatever
//     removes it: foldContainerSeq), and it only rises. A container's
//     counter starts at containerSeq when it is made
//     (containerSeqStart). Proof that a container made again at a path
//     never names a node as the old one did: every number the old one
//     handed out is below its counter at its delete, which is at most
//     containerSeq from that delete on, which is at most the new one's
//     first number, since the new one is made after the old one's
//     delete (a path holds one node at a time). So no lock node path of
//     a cell is used twice, and every token the new container grants
//     (a create index) is above every token the old one granted. A
//     prefix move carries a container's counter (NextSeq); one deleted
//     and made again on the new cell may name a node as the old cell
//     did, but under the new directory epoch: every token it grants is
//     above the old cell's. The counter is per cell, not per index: it
//     grows only by the numbers containers use (not by every entry),
//     so the ten digits of a name last as long as the cell's creates.
//
//   - A container counts against its tenant's node quota and the cell's
//     limits as any node (link), and is released when deleted
//     (removeNode): per-entity lock directories do not pile up.
//
// A container is never served from a client cache (it has children, or
// lives empty only in a lock-delay; cacheableNode refuses it), so its
// deletion needs no invalidation round. Watches on it see the deletion
// (ChangeDeleted), and its parent's children watches the change.

import (
	"fmt"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// maxContainerCascade bounds how many containers one removal deletes up
// a path: each level is at least two bytes ("/x") of a path of at most
// api.MaxPathLen.
const maxContainerCascade = api.MaxPathLen / 2

// containerSeqStart is where the sequence counter of a container the
// create c makes starts: above every number a container of this cell
// deleted so far handed out (0 for any other create).
func (s *State) containerSeqStart(c *Command) uint64 {
	if !c.Container || mutant.On(mutant.ContainerSeqFromZero) {
		return 0
	}
	return s.containerSeq
}

// foldContainerSeq raises containerSeq to the counter of n, a container
// being removed (removeNode).
func (s *State) foldContainerSeq(n *node) {
	if n.container {
		s.containerSeq = max(s.containerSeq, n.nextSeq)
	}
}

// checkContainerCreate refuses Container on a create without
// make_parents (it marks the directories make_parents makes).
func checkContainerCreate(c *Command) *api.Error {
	if c.Container && !c.MakeParents {
		return api.Errorf(api.CodeBadRequest, "container is for a create with make_parents: it marks the directories the create makes")
	}
	return nil
}

// markContainers makes containers of the directories make_parents just
// made (their ChangeCreated entries), when the create asks it.
func (s *State) markContainers(c *Command, made []Change) {
	if !c.Container {
		return
	}
	for _, ch := range made {
		if ch.Type != ChangeCreated {
			continue
		}
		n := s.nodes[ch.Path]
		n.container = true
		n.nextSeq = max(n.nextSeq, s.containerSeqStart(c)) // link may have taken a kept counter: never back
	}
}

// emptyContainer reports whether d is a container to delete now: no
// children and no lock-delay, under a prefix this cell serves.
func (s *State) emptyContainer(d *node) bool {
	if !d.container || d.numChildren() > 0 || d.parent == nil {
		return false
	}
	if d.delay != nil && !mutant.On(mutant.ContainerIgnoresDelay) {
		return false // end_lock_delay deletes it
	}
	root := s.nodes[api.Prefix(d.path)]
	return root != nil && root.prefixState == ""
}

// dropEmptyContainers deletes d if it is an empty container, then each
// ancestor left an empty container, at most maxContainerCascade.
func (s *State) dropEmptyContainers(index uint64, d *node) []Change {
	var changes []Change
	for i := 0; i < maxContainerCascade && d != nil && s.emptyContainer(d); i++ {
		up := d.parent
		changes = append(changes, s.removeNode(index, d)...)
		d = up
	}
	return changes
}

// removeWithContainers removes the childless node n, then the containers
// its removal leaves empty.
func (s *State) removeWithContainers(index uint64, n *node) []Change {
	p := n.parent
	return append(s.removeNode(index, n), s.dropEmptyContainers(index, p)...)
}

// sweepContainers deletes the empty containers under root, a prefix
// served here from this entry on (a staged copy, or an unsealed one):
// the seal deleted the lock nodes under them without this rule.
func (s *State) sweepContainers(index uint64, root *node) []Change {
	var changes []Change
	for _, n := range s.below(root) { // children before their parents
		if s.nodes[n.path] == n && n.container {
			changes = append(changes, s.dropEmptyContainers(index, n)...)
		}
	}
	return changes
}

// checkContainers verifies the container rules on every node: only
// persistent nodes below a prefix root are containers, and no empty
// container without a lock-delay is left in a prefix served here.
func (s *State) checkContainers() error {
	for _, n := range s.nodes {
		if !n.container {
			continue
		}
		if n.ephemeral || n.parent == s.root || n.lock != api.LockNone {
			return fmt.Errorf("container %s is ephemeral, a prefix root or a lock node", n.path)
		}
		if s.emptyContainer(n) {
			return fmt.Errorf("container %s is empty and not in lock-delay, yet not deleted", n.path)
		}
	}
	return nil
}
