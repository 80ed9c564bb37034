package dirfsm

import (
	"github.com/lockservice/lockd/api"
)

func checkPrefix(p string) *api.Error {
	if err := api.ValidatePath(p); err != nil || api.Parent(p) != "/" {
		return api.Errorf(api.CodeInvalidPath, "%q is not a top-level prefix like /payments", p)
	}
	return nil
}

func (s *State) assign(r *api.AssignPrefixRequest) Result {
	if err := checkPrefix(r.Prefix); err != nil {
		return Result{Err: err}
	}
	if _, ok := s.cells[r.Cell]; !ok {
		return refuse(api.CodeNotFound, "no cell %s", r.Cell)
	}
	if p, ok := s.prefixes[r.Prefix]; ok {
		if p.Cell == r.Cell && p.Migration == nil {
			return Result{Prefix: clonePrefix(p)} // already so
		}
		return refuse(api.CodeConflict, "prefix %s is served by cell %s: move it with lockctl migrate", r.Prefix, p.Cell)
	}
	p := &api.PrefixInfo{Prefix: r.Prefix, Cell: r.Cell, Epoch: 1}
	s.prefixes[r.Prefix] = p
	return Result{Prefix: clonePrefix(p)}
}

func clonePrefix(p *api.PrefixInfo) *api.PrefixInfo {
	c := *p
	if p.Migration != nil {
		m := *p.Migration
		c.Migration = &m
	}
	return &c
}
