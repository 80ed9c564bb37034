package fsm

import (
	"sort"

	"github.com/lockservice/lockd/api"
)

// MaxStagedCount bounds the nodes StagedCopies counts under one staged
// root: a status read holds the state's read lock, and every lockd reads
// every other's status every 5 s (about 1 ms for this many). A count at
// the bound means "at least".
const MaxStagedCount = 1 << 16

// StagedCopies lists the top-level prefixes whose copy this cell is
// taking up (staging, or staged and not yet serving), with the nodes
// staged so far, the root included.
func (s *State) StagedCopies() []api.StagedCopy {
	var out []api.StagedCopy
	for _, root := range s.root.children() {
		if root.prefixState != PrefixStaging && root.prefixState != PrefixStaged {
			continue
		}
		out = append(out, api.StagedCopy{Prefix: root.path, Nodes: countNodes(root, MaxStagedCount)})
	}
	return out
}

// countNodes counts root and the nodes under it, up to limit.
func countNodes(root *node, limit int) int {
	n, stack := 0, []*node{root}
	for len(stack) > 0 && n < limit {
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n++
		stack = append(stack, top.children()...)
	}
	return n
}

// Usages is every tenant's usage of the cell, by name.
func (s *State) Usages() []api.TenantUsage {
	out := make([]api.TenantUsage, 0, len(s.tenants))
	for name, u := range s.tenants {
		out = append(out, api.TenantUsage{Tenant: name, Sessions: u.sessions, Nodes: u.nodes, Bytes: u.bytes})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}
