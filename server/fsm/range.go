package fsm

import (
	"sort"

	"github.com/lockservice/lockd/api"
)

// RangeOptions shape a range read (api.RangeRequest's fields).
type RangeOptions struct {
	// Limit bounds the nodes returned: 1..api.MaxRangeKeys (the caller
	// clamps it).
	Limit          int
	KeysOnly       bool
	CountOnly      bool
	SkipContainers bool
}

// subtreeEnd is the first path after every path of n's subtree in byte
// order: the subtree of p is [p, p+"0") ('0' follows '/').
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
	var found []*node
	if end == "" {
		if n, ok := s.nodes[start]; ok {
			found = append(found, n)
		}
	} else {
		var err *api.Error
		if found, err = s.scan(s.spanRoot(start, end), start, end, api.MaxRangeScan); err != nil {
			return api.RangeResponse{}, err
		}
		sort.Slice(found, func(i, j int) bool { return found[i].path < found[j].path })
	}
	return s.rangePage(found, opt), nil
}

// spanRoot is the deepest node whose subtree holds all of [start, end):
// an ancestor (or start itself) p of start with end <= p's subtreeEnd.
func (s *State) spanRoot(start, end string) *node {
	for q := start; q != "/" && q != ""; q = api.Parent(q) {
		if end > subtreeEnd(q) {
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
// (api.MaxRangeScan; tests pass less).
func (s *State) scan(root *node, start, end string, bound int) ([]*node, *api.Error) {
	var found []*node
	stack := []*node{root}
	for visited := 0; len(stack) > 0; visited++ {
		if visited >= bound {
			return nil, api.Errorf(api.CodeLimitExceeded, "range [%s, %s) visits more than %d nodes (MaxRangeScan): narrow it", start, end, bound)
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
	return found, nil
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
