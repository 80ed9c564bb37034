package dirfsm

import (
	"sort"

	"github.com/lockservice/lockd/api"
)

func (s *State) register(l api.LockdInfo) Result {
	if l.ID == 0 || l.RaftAddr == "" || l.APIAddr == "" {
		return refuse(api.CodeBadRequest, "a lockd needs an id, a raft address and an API address")
	}
	if r, old := s.codecTooOld(l); old {
		return r
	}
	if old, ok := s.lockds[l.ID]; ok && old.RaftAddr != l.RaftAddr {
		// Raft addresses name replicas in every group it hosts: a lockd
		// that moved must be replaced (member add/remove), not renamed.
		return refuse(api.CodeConflict, "lockd %d is registered at raft address %s, not %s", l.ID, old.RaftAddr, l.RaftAddr)
	}
	for _, other := range s.lockds {
		if other.ID != l.ID && (other.RaftAddr == l.RaftAddr || other.APIAddr == l.APIAddr) {
			return refuse(api.CodeConflict, "lockd %d already uses the address of lockd %d", other.ID, l.ID)
		}
	}
	s.lockds[l.ID] = l
	return Result{}
}

func (s *State) registerProxy(p api.ProxyInfo) Result {
	if err := checkCellName(p.Name); err != nil {
		return refuse(api.CodeBadRequest, "proxy name: %s", err.Message)
	}
	if p.APIAddr == "" {
		return refuse(api.CodeBadRequest, "a proxy needs an API address")
	}
	for _, other := range s.proxies {
		if other.Name != p.Name && other.APIAddr == p.APIAddr {
			return refuse(api.CodeConflict, "proxy %s already uses the address %s", other.Name, p.APIAddr)
		}
	}
	s.proxies[p.Name] = p
	return Result{}
}

// proxyList is the proxies by name.
func (s *State) proxyList() []api.ProxyInfo {
	var out []api.ProxyInfo
	for _, p := range s.proxies {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *State) lockdList() []api.LockdInfo {
	out := make([]api.LockdInfo, 0, len(s.lockds))
	for _, l := range s.lockds {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
