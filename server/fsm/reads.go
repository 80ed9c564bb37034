package fsm

import (
	"github.com/lockservice/lockd/api"
)

func (s *State) meta(n *node, withValue bool) *api.Node {
	m := nodeMeta(n)
	if withValue {
		m.Value = valueBytes(n.value)
	}
	return &m
}

// nodeMeta is n as api.Node without its value (reads and the change
// ring build their answers on it).
func nodeMeta(n *node) api.Node {
	return api.Node{
		Path: n.path, Version: n.version, CreateIndex: n.createIndex, ModifyIndex: n.modifyIndex,
		ChildIndex: n.childIndex, Ephemeral: n.ephemeral, Owner: n.owner, Lock: n.lock, NumChildren: n.numChildren(),
		Container: n.container,
	}
}

// Get returns a node with its value.
func (s *State) Get(path string) (api.Node, bool) {
	n, ok := s.nodes[path]
	if !ok {
		return api.Node{}, false
	}
	return *s.meta(n, true), true
}

// Children returns a node and its children's names, sorted.
func (s *State) Children(path string) (api.Node, []string, bool) {
	n, ok := s.nodes[path]
	if !ok {
		return api.Node{}, nil, false
	}
	names := make([]string, 0, n.numChildren())
	for _, k := range n.children() {
		names = append(names, api.Base(k.path))
	}
	return *s.meta(n, false), names, true
}

// WatchCheck decides whether a watch armed at since must fire at once
// because the node changed after since, and with which event. For a missing
// node it uses the nearest existing ancestor's child index, which moves on
// any create or delete below it: a node created and deleted while the client
// was away still fires the watch (the record outlives the node).
func (s *State) WatchCheck(path string, kind api.WatchKind, since uint64) (api.EventType, bool) {
	n, ok := s.nodes[path]
	if ok {
		switch kind {
		case api.WatchData:
			if n.createIndex > since {
				return api.EventCreated, true
			}
			if n.modifyIndex > since {
				return api.EventDataChanged, true
			}
			if n.delayEnded() > since {
				return api.EventLockDelayEnded, true
			}
		case api.WatchChildren:
			if n.childIndex > since {
				return api.EventChildrenChanged, true
			}
		}
		return "", false
	}
	if kind == api.WatchChildren {
		return api.EventDeleted, true
	}
	for q := api.Parent(path); ; q = api.Parent(q) {
		a := s.root
		if q != "/" {
			var found bool
			if a, found = s.nodes[q]; !found {
				continue
			}
		}
		if a.childIndex > since || a.createIndex > since {
			return api.EventDeleted, true
		}
		return "", false
	}
}
