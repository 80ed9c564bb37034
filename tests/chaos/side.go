package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/chaos/check"
	"github.com/lockservice/lockd/tests/cluster"
)

// The workloads on the prefix the move, restore and fsync nemeses move
// between cells (/side): unique acknowledged puts, config keys read from
// the client cache, the bulk the racing drivers copy, and the locks held
// through a move.
const (
	sideBase      = sidePrefix + "/chaos"
	sideCfgBase   = sideBase + "/cfg"
	sideAckedBase = sideBase + "/acked"
	sideBulkBase  = sideBase + "/bulk"
	sideHeldLock  = sideBase + "/held"
	sideStaleLock = sideBase + "/rx"
	sideProbeBase = sideBase + "/probe"
)

// sideGrant is the workloads' tenant's grant on the moving prefix.
var sideGrant = api.Grant{Prefix: sideBase, Roles: []api.Role{api.RoleWrite, api.RoleLock}}

// sideCell is the cell serving /side in c's directory.
func sideCellOf(c *sdk.Client) string {
	cell, err := c.CellFor(sidePrefix)
	if err != nil {
		return sideCell
	}
	return cell
}

// seedBulk writes n nodes under the bulk path (so that a copy takes several
// pages), each recorded as an acknowledged write that every move must keep.
func (e *env) seedBulk(admin *sdk.Client, n int) error {
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Minute)
	defer cancel()
	if _, err := admin.Put(ctx, sideBulkBase, nil, sdk.MakeParents()); err != nil {
		return fmt.Errorf("create %s: %w", sideBulkBase, err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		jobs = make(chan int)
	)
	for w := 0; w < 16; w++ {
		wg.Go(func() {
			for i := range jobs {
				key := fmt.Sprintf("%s/b%05d", sideBulkBase, i)
				call := e.h.Now()
				_, err := admin.Put(ctx, key, []byte(key))
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				e.h.AddPrefixWrite(check.PrefixWrite{Prefix: sidePrefix, Key: key, Value: key, Call: call, Return: e.h.Now()})
			}
		})
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("bulk seed: %d of %d puts failed: %w", len(errs), n, errs[0])
	}
	return nil
}

// sideWriter puts unique keys under /side; each acknowledged one must
// survive every move, and a restore must lose exactly those after its
// backup (checker m2).
func (e *env) sideWriter(name string) {
	c, err := e.newClient(name, false, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	r := e.rng(name)
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		key := fmt.Sprintf("%s/%s-%d", sideAckedBase, name, i)
		val := fmt.Sprintf("v%d", r.Uint32())
		ctx, cancel := e.callCtx()
		call := e.h.Now()
		err := e.op(name, "side-put", func() error {
			_, err := c.Put(ctx, key, []byte(val), sdk.MakeParents())
			return err
		})
		cancel()
		if err == nil {
			e.h.AddPrefixWrite(check.PrefixWrite{Prefix: sidePrefix, Key: key, Value: val, Call: call, Return: e.h.Now()})
		}
		sleepCtx(e.ctx, jitter(r, e.cfg.Think, 4*e.cfg.Think))
	}
}

// sideConfigWorker is configWorker on the moving prefix: gets from the
// client cache, puts and compare-and-sets, recorded for the
// linearizability checker across moves, restores and timed-out writes;
// and its session's lease claims and ends, for checker m3.
func (e *env) sideConfigWorker(id int, name string, keys []string) {
	c, err := e.newClient(name, false, e.cfg.RequestTimeout)
	if err != nil {
		e.logf("chaos: %v", err)
		return
	}
	r := e.rng(name)
	seen := map[string]uint64{}
	watched := map[*sdk.Session]bool{}
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		ctx, cancel := e.callCtx()
		cell := sideCellOf(c)
		s, err := c.Session(ctx, cell)
		if err != nil {
			cancel()
			sleepCtx(e.ctx, 100*time.Millisecond)
			continue
		}
		if !watched[s] {
			watched[s] = true
			e.goWorker(func() { e.watchLease(name+"@"+cell, s) })
		}
		key := keys[r.IntN(len(keys))]
		op := e.configOnce(ctx, c, r, name, i, key, seen)
		op.Client = 100 + id
		cancel()
		e.h.AddSideConfig(op)
		sleepCtx(e.ctx, jitter(r, e.cfg.Think/4, e.cfg.Think))
	}
}

// watchLease records a session's lease claims (every SessionSafe, and a
// sample of its local lease while it is not in jeopardy) and its end if
// the cell ended it.
func (e *env) watchLease(worker string, s *sdk.Session) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	claim := func(src string) {
		if s.InJeopardy() || s.Err() != nil {
			return
		}
		until := time.Until(s.LocalExpiry())
		now := e.h.Now()
		e.h.AddClaim(check.LeaseClaim{Worker: worker, Session: s.ID(), At: now, Until: now + until, Source: src})
	}
	for i := 0; i < maxIterations; i++ {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				e.sessionEnded(worker, s)
				return
			}
			switch ev.Type {
			case sdk.SessionSafe:
				claim("safe-event")
			case sdk.SessionExpired:
				e.sessionEnded(worker, s)
				return
			}
		case <-tick.C:
			claim("lease-sample")
		case <-s.Done():
			e.sessionEnded(worker, s)
			return
		case <-e.ctx.Done():
			return
		}
	}
}

// sessionEnded records a session end the cell decided (not a close, not
// the client's own grace running out).
func (e *env) sessionEnded(worker string, s *sdk.Session) {
	err := s.Err()
	if e.ctx.Err() != nil || err == nil || errors.Is(err, sdk.ErrClosed) {
		return
	}
	if code := api.CodeOf(err); code == api.CodeSessionExpired || code == api.CodeNoSession {
		e.h.AddSessionEnd(check.SessionEnd{Worker: worker, Session: s.ID(), By: e.h.Now(), How: "told " + string(code)})
	}
}

// serveSampler reads, every period, the state of each watched prefix on
// every lockd that says it leads a cell (checker m1): each cell's own
// word on what it serves, at which epoch.
func (e *env) serveSampler(c *cluster.Cluster, prefixes []string, period time.Duration) {
	cl := c.NewClient()
	defer cl.Close()
	for i := 0; i < maxIterations && e.ctx.Err() == nil; i++ {
		ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
		sts := c.Statuses(ctx)
		cancel()
		var wg sync.WaitGroup
		for id, st := range sts {
			for _, rs := range st.Cells {
				if rs.Role != "leader" {
					continue
				}
				for _, p := range prefixes {
					wg.Go(func() { e.sampleServe(cl, c.APIAddr(id), rs.Cell, p) })
				}
			}
		}
		wg.Wait()
		sleepCtx(e.ctx, period)
	}
}

func (e *env) sampleServe(cl *cluster.Client, addr, cell, prefix string) {
	body, _ := json.Marshal(api.PrefixOpRequest{Cell: cell, Prefix: prefix, Op: api.PrefixState})
	start := e.h.Now()
	code, out, err := cl.Once(e.ctx, addr, "POST", api.RouteAdminPrefixOp, body, 2*time.Second)
	end := e.h.Now()
	if err != nil || code != 200 {
		return
	}
	var r api.PrefixOpResponse
	if json.Unmarshal(out, &r) != nil {
		return
	}
	e.h.Checked("single-server")
	e.h.AddServe(check.ServeSample{Cell: cell, Prefix: prefix, State: r.State, Epoch: r.Epoch, Index: r.Index, Start: start, End: end})
}
