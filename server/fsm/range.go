package fsm

import (
	"slices"
	"sort"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// RangeOptions shape a range read (api.RangeRequest's fields).
type RangeOptions struct {
	// Limit bounds the nodes returned: 1..api.MaxRangeKeys (the caller
	// clamps it).
	Limit          int
	KeysOnly       bool
	CountOnly      bool
	SkipContainers bool
	// Root is the subtree the caller may read (api.RangeRequest.Root):
	// only nodes at or under it are answered, whatever the span ("":
	// any). [Root, Root+"0") in byte order also holds Root's siblings
	// named Root and a character before '/' ("/a-b" for "/a").
	Root string
}

// subtreeEnd is the first path after every path of n's subtree in byte
// order: the subtree of p lies in [p, p+"0") ('0' follows '/'), with
// p's siblings named p and a character before '/' (RangeOptions.Root).
func subtreeEnd(p string) string {
	if p == "/" {
		return "0"
	}
	return p + "0"
}

// Range reads the nodes whose paths p satisfy start <= p < end in byte
// order (end "": exactly start): Nodes in byte order of path, at most
// opt.Limit and api.MaxRangeBytes of values, Count every node of the
// span (containers left out with SkipContainers), More whether nodes of
// the span follow the returned ones. It visits at most api.MaxRangeScan
// nodes of the subtree that holds the span, refusing the read with
// limit_exceeded past that. Pure: it reads the state only.
func (s *State) Range(start, end string, opt RangeOptions) (api.RangeResponse, *api.Error) {
	found, _, err := s.spanNodes(start, end, opt.Root, api.MaxRangeScan)
	if err != nil {
		return api.RangeResponse{}, err
	}
	return s.rangePage(found, opt), nil
}

// RangeSpan is one read of Ranges: Range's arguments.
type RangeSpan struct {
	Start, End string
	Opt        RangeOptions
}

// Ranges reads every span as Range does, in one pass over the state (so
// at one index), the answers in order. Together the spans visit at most
// api.MaxRangeScan nodes, return at most api.MaxRangeKeys nodes and
// carry at most api.MaxRangeBytes of values, else the read is refused
// limit_exceeded (the caller may read fewer at once). The caller bounds
// the spans (api.MaxRangesPerRead). Pure: it reads the state only.
func (s *State) Ranges(spans []RangeSpan) ([]api.RangeResponse, *api.Error) {
	budget, nodes, bytes := api.MaxRangeScan, 0, 0
	out := make([]api.RangeResponse, 0, len(spans))
	for _, sp := range spans {
		found, visited, err := s.spanNodes(sp.Start, sp.End, sp.Opt.Root, budget)
		if err != nil {
			return nil, api.Errorf(api.CodeLimitExceeded, "%d ranges read together visit more than %d nodes (MaxRangeScan): read fewer at once", len(spans), api.MaxRangeScan)
		}
		budget -= visited
		resp := s.rangePage(found, sp.Opt)
		nodes += len(resp.Nodes)
		for i := range resp.Nodes {
			bytes += len(resp.Nodes[i].Value)
		}
		switch {
		case nodes > api.MaxRangeKeys:
			return nil, api.Errorf(api.CodeLimitExceeded, "%d ranges read together return more than %d nodes (MaxRangeKeys): read fewer at once", len(spans), api.MaxRangeKeys)
		case bytes > api.MaxRangeBytes:
			return nil, api.Errorf(api.CodeLimitExceeded, "%d ranges read together carry more than %d bytes of values (MaxRangeBytes): read fewer at once", len(spans), api.MaxRangeBytes)
		}
		out = append(out, resp)
	}
	return out, nil
}

// spanNodes are the nodes of [start, end) (end "": the node start) at or
// under root ("": any), in path order, visiting at most bound nodes: how
// many it visited.
func (s *State) spanNodes(start, end, root string, bound int) ([]*node, int, *api.Error) {
	if bound < 1 {
		return nil, 0, api.Errorf(api.CodeLimitExceeded, "a range visits more than %d nodes (MaxRangeScan)", bound)
	}
	if _, ok := s.nodes[root]; root != "" && root != "/" && !ok && !mutant.On(mutant.RangeRoot) {
		return nil, 1, nil // nothing lies under a missing node: its span holds only its siblings
	}
	if end == "" {
		if n, ok := s.nodes[start]; ok && underRoot(root, n.path) {
			return []*node{n}, 1, nil
		}
		return nil, 1, nil
	}
	found, visited, err := s.scan(s.spanRoot(start, end, root), start, end, bound)
	if err != nil {
		return nil, visited, err
	}
	found = slices.DeleteFunc(found, func(n *node) bool { return !underRoot(root, n.path) })
	sort.Slice(found, func(i, j int) bool { return found[i].path < found[j].path })
	return found, visited, nil
}

// underRoot reports whether path is root or lies under it (root "" or
// "/": every path).
func underRoot(root, path string) bool {
	return root == "" || root == "/" || under(root, path) || mutant.On(mutant.RangeRoot)
}

// spanRoot is the deepest node whose subtree holds all of [start, end)
// at or under root: an ancestor (or start itself) p of start with end <=
// p's subtreeEnd. start itself only if the span is that one path or
// start is root: [start, start+"0") also holds start's siblings named
// start and a character before '/' (start-x), which lie under root
// unless start is root.
func (s *State) spanRoot(start, end, root string) *node {
	for q := start; q != "/" && q != ""; q = api.Parent(q) {
		if end > subtreeEnd(q) || q == start && q != root && end > q+"\x00" {
			continue
		}
		if n, ok := s.nodes[q]; ok {
			return n
		}
	}
	return s.root
}

// scan collects the nodes of root's subtree in [start, end), skipping
// the subtrees that cannot meet it; an error past bound visited nodes
// (api.MaxRangeScan; tests pass less), and how many it visited.
func (s *State) scan(root *node, start, end string, bound int) ([]*node, int, *api.Error) {
	var found []*node
	stack := []*node{root}
	visited := 0
	for ; len(stack) > 0; visited++ {
		if visited >= bound {
			return nil, visited, api.Errorf(api.CodeLimitExceeded, "range [%s, %s) visits more than %d nodes (MaxRangeScan): narrow it", start, end, bound)
		}
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.path >= start && n.path < end && n != s.root {
			found = append(found, n)
		}
		for _, k := range n.children() {
			if subtreeEnd(k.path) <= start || k.path >= end {
				continue // nothing of k's subtree lies in the span
			}
			stack = append(stack, k)
		}
	}
	return found, visited, nil
}

// rangePage makes the answer from the span's nodes, in path order.
func (s *State) rangePage(found []*node, opt RangeOptions) api.RangeResponse {
	var resp api.RangeResponse
	var bytes int
	for _, n := range found {
		if opt.SkipContainers && n.container {
			continue
		}
		resp.Count++
		if opt.CountOnly || resp.More {
			continue
		}
		withValue := !opt.KeysOnly
		if len(resp.Nodes) == opt.Limit || (withValue && len(resp.Nodes) > 0 && bytes+len(n.value) > api.MaxRangeBytes) {
			resp.More = true
			continue
		}
		bytes += len(n.value)
		resp.Nodes = append(resp.Nodes, *s.meta(n, withValue))
	}
	return resp
}
