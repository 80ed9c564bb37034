package lockd

import (
	"sync"
	"time"

	"github.com/lockservice/lockd/server/dirfsm"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/directory"
)

// balanceEvery is how often the directory's leader evens out leaderships.
const balanceEvery = 5 * time.Second

// balanceLeaders runs on every directory replica and acts only while this
// lockd leads the directory group: each round it reads every lockd's
// status, and if one lockd leads two cells more than another that holds
// a voting replica of one of them, asks that cell's leader to hand
// leadership over (dirfsm.BalanceLeaders decides; one transfer a round,
// so the next round sees its effect).
func (p *Process) balanceLeaders() {
	p.every(balanceEvery, p.balanceRound)
}

// balanceRound hands one leadership over if the directory's balance asks
// for it; only the directory's leader balances.
func (p *Process) balanceRound() {
	if lead, ok := p.dir.Leader(); !ok || lead != p.cfg.ReplicaID {
		return
	}
	view := p.view.Load()
	if view.Index() == 0 {
		return
	}
	leaders, answered := p.cellLeaders(view)
	voters := map[string][]uint64{}
	for _, c := range view.Cells() {
		for _, r := range c.Replicas {
			// A lockd that did not answer leads nothing as far as the
			// balance can tell: a transfer to it would only hold the
			// cell's renewals for nothing (handover.go).
			if !r.Learner && r.Pending == "" && answered[r.Lockd] {
				voters[c.Name] = append(voters[c.Name], r.Lockd)
			}
		}
	}
	tr, ok := dirfsm.BalanceLeaders(leaders, voters)
	if !ok {
		return
	}
	from, known := view.Lockd(tr.From)
	if !known {
		return
	}
	var out struct{}
	if err := p.peerCall(from.APIAddr, "POST", api.RouteAdminTransfer, api.TransferRequest{Cell: tr.Cell, To: tr.To}, &out); err != nil {
		p.log.Warn("leader balancing: transfer refused", "cell", tr.Cell, "from", tr.From, "to", tr.To, "err", err)
		return
	}
	p.log.Info("leader balancing: leadership handed over", "cell", tr.Cell, "from", tr.From, "to", tr.To)
}

// every runs f every d until the lockd stops (p.wg counted by the caller).
func (p *Process) every(d time.Duration, f func()) {
	defer p.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		f()
	}
}

// cellLeaders asks every lockd of the view which cells it leads; a cell
// two lockds claim (one deposed, not yet told) goes to the higher term.
// answered are the lockds that answered and are not stopping.
func (p *Process) cellLeaders(view *directory.Directory) (map[string]uint64, map[uint64]bool) {
	type claim struct {
		lockd, term uint64
	}
	var mu sync.Mutex
	claims := map[string]claim{}
	answered := map[uint64]bool{}
	var wg sync.WaitGroup
	for _, l := range view.Response().Lockds {
		wg.Add(1)
		go func(l api.LockdInfo) {
			defer wg.Done()
			var st api.StatusResponse
			if l.ID == p.cfg.ReplicaID {
				st = p.Status()
			} else if err := p.peerCall(l.APIAddr, "GET", api.RouteStatus, nil, &st); err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			answered[l.ID] = !st.Stopping // a stopping lockd takes no leadership
			for _, rs := range st.Cells {
				if rs.Role == "leader" && rs.Term >= claims[rs.Cell].term {
					claims[rs.Cell] = claim{lockd: l.ID, term: rs.Term}
				}
			}
		}(l)
	}
	wg.Wait()
	out := map[string]uint64{}
	for cell, c := range claims {
		out[cell] = c.lockd
	}
	return out, answered
}
