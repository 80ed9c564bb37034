package fsm

import (
	"slices"
	"strings"
	"unsafe"
)

// kidList is a node's children in path order (children of one parent
// share its path as a prefix, so this is name order too). A sorted slice
// costs a pointer per child where a map cost about five words, lists in
// order without sorting, and iterates the same on every replica. An
// insert or a removal moves the later children along: at most
// api.MaxChildrenPerNode pointers.
type kidList struct {
	nodes []*node
}

// numChildren is how many children n has.
func (n *node) numChildren() int {
	if n.kids == nil {
		return 0
	}
	return len(n.kids.nodes)
}

// children are n's children in path order; the caller must not change
// the slice, and a later add or remove may reuse it.
func (n *node) children() []*node {
	if n.kids == nil {
		return nil
	}
	return n.kids.nodes
}

// childAt finds where a child with path p is or would go among n's
// children.
func (n *node) childAt(p string) (int, bool) {
	return slices.BinarySearchFunc(n.children(), p, func(k *node, p string) int { return strings.Compare(k.path, p) })
}

// addChild links k (whose path is not among n's children) under n.
func (n *node) addChild(k *node) {
	if n.kids == nil {
		n.kids = &kidList{}
	}
	i, _ := n.childAt(k.path)
	n.kids.nodes = slices.Insert(n.kids.nodes, i, k)
}

// removeChild unlinks k from n's children, if there; the last one gone
// frees the list.
func (n *node) removeChild(k *node) {
	i, ok := n.childAt(k.path)
	if !ok {
		return
	}
	n.kids.nodes = slices.Delete(n.kids.nodes, i, i+1)
	if len(n.kids.nodes) == 0 {
		n.kids = nil
	}
}

// valueBytes copies a node's value out (nil if empty, as it was stored).
func valueBytes(v string) []byte {
	if v == "" {
		return nil
	}
	return []byte(v)
}

// valueView is a node's value as bytes without a copy, for the snapshot
// writer only: the encoder reads it and never writes to it.
func valueView(v string) []byte {
	if v == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(v), len(v))
}
