package lockd

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
)

// Status reports every hosted cell as this replica sees it.
func (p *Process) Status() api.StatusResponse {
	self := p.cfg.Self()
	st := api.StatusResponse{ReplicaID: self.ID, APIAddr: self.APIAddr, RaftAddr: self.RaftAddr, Version: Version}
	st.Zone = p.cfg.Zone
	st.Stopping = p.stopping.Load()
	st.DirectoryReplica = p.dir != nil
	if p.dir != nil {
		st.DirectoryLeader, _ = p.dir.Leader()
	}
	st.DirectoryIndex = p.view.Load().Index()
	st.LogCodec, st.LogCodecFloor = p.cfg.LogCodec(), p.view.Load().LogCodec()
	p.probe.status(time.Now(), &st)
	cells := p.allCells()
	sort.Slice(cells, func(i, j int) bool { return cells[i].Info().Name < cells[j].Info().Name })
	for _, c := range cells {
		st.Cells = append(st.Cells, c.Status())
	}
	return st
}

// ClusterStatus asks every lockd of the directory for its status at once
// (a second each at most; itself without a call), for the status page.
func (p *Process) ClusterStatus(ctx context.Context) api.ClusterStatus {
	self := p.cfg.Self()
	lockds := p.Directory().Response().Lockds
	out := api.ClusterStatus{Self: self.APIAddr, Lockds: make([]api.LockdStatus, len(lockds))}
	var wg sync.WaitGroup
	for i, l := range lockds {
		out.Lockds[i] = api.LockdStatus{ID: l.ID, APIAddr: l.APIAddr, Zone: l.Zone}
		if l.ID == self.ID {
			st := p.Status()
			out.Lockds[i].Status = &st
			continue
		}
		wg.Add(1)
		go func(ls *api.LockdStatus) {
			defer wg.Done()
			var st api.StatusResponse
			if err := p.peerCallWithin(callBound(ctx), ls.APIAddr, "GET", api.RouteStatus, nil, &st); err != nil {
				ls.Error = err.Error()
				return
			}
			p.seen.answer(ls.ID, time.Now())
			ls.Status = &st
		}(&out.Lockds[i])
	}
	wg.Wait()
	return out
}

// CallLockd makes one API call to another lockd as this one, marked as
// forwarded (the other lockd serves it itself).
func (p *Process) CallLockd(ctx context.Context, addr, method, route string, body, out any) error {
	within := peerTimeout
	if d, ok := ctx.Deadline(); ok {
		within = min(within, time.Until(d))
	}
	pc := p.peers
	pc.forwarded = true
	return callPeer(pc, within, addr, method, route, body, out)
}
