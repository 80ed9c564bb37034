package dirfsm

import (
	"sort"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

func (s *State) cellInfo(c *cellRec) api.CellInfo {
	info := api.CellInfo{Name: c.Name, ShardID: c.ShardID, RestoreIndex: c.RestoreIndex, Restores: c.Restores, Timing: cloneTiming(c.Timing)}
	for _, r := range c.Replicas {
		l := s.lockds[r.Lockd]
		info.Replicas = append(info.Replicas, api.ReplicaInfo{ReplicaID: r.ReplicaID, Lockd: r.Lockd, APIAddr: l.APIAddr, Zone: l.Zone, Learner: r.Learner, Initial: r.Initial, Pending: r.Pending, JoinedLearner: r.Joined, Restored: r.Restored})
		info.Endpoints = append(info.Endpoints, l.APIAddr)
	}
	for _, p := range s.prefixes {
		if p.Cell == c.Name {
			info.Prefixes = append(info.Prefixes, p.Prefix)
		}
	}
	sort.Strings(info.Prefixes)
	return info
}

// Response is the whole directory as the API serves it, sorted.
func (s *State) Response() api.DirectoryResponse {
	d := api.DirectoryResponse{Index: s.index, Lockds: s.lockdList(), Proxies: s.proxyList(), Tenants: s.tenantList(), LogCodec: s.codecFloor}
	names := make([]string, 0, len(s.cells))
	for n := range s.cells {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d.Cells = append(d.Cells, s.cellInfo(s.cells[n]))
	}
	for _, p := range s.prefixes {
		d.Prefixes = append(d.Prefixes, *clonePrefix(p))
	}
	sort.Slice(d.Prefixes, func(i, j int) bool { return d.Prefixes[i].Prefix < d.Prefixes[j].Prefix })
	d.Directory = api.CellInfo{Name: "directory", ShardID: directory.ShardID}
	for _, id := range s.dirLockds {
		l := s.lockds[id]
		d.Directory.Replicas = append(d.Directory.Replicas, api.ReplicaInfo{ReplicaID: id, Lockd: id, APIAddr: l.APIAddr, Zone: l.Zone, Initial: true})
		d.Directory.Endpoints = append(d.Directory.Endpoints, l.APIAddr)
	}
	return d
}
