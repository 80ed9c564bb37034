package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
)

// statusTimeout bounds one /v1/status call: a paused replica must not stall
// a leader search.
const statusTimeout = time.Second

// Status asks replica id for its /v1/status.
func (c *Cluster) Status(ctx context.Context, id int) (api.StatusResponse, error) {
	var st api.StatusResponse
	p, err := c.proc(id)
	if err != nil {
		return st, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Scheme()+"://"+p.node.APIAddr+api.RouteStatus, nil)
	resp, err := c.http.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status of replica %d: HTTP %d: %s", id, resp.StatusCode, b)
	}
	return st, json.Unmarshal(b, &st)
}

// Statuses asks every running, unpaused replica for its status, in
// parallel; replicas that do not answer are missing from the map.
func (c *Cluster) Statuses(ctx context.Context) map[int]api.StatusResponse {
	var (
		mu  sync.Mutex
		out = map[int]api.StatusResponse{}
		wg  sync.WaitGroup
	)
	for _, id := range c.IDs() {
		if !c.Running(id) || c.Paused(id) {
			continue
		}
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			if st, err := c.Status(ctx, id); err == nil {
				mu.Lock()
				out[id] = st
				mu.Unlock()
			}
		}(id)
	}
	wg.Wait()
	return out
}

// leaderOnce returns the replica that, among those answering, claims to
// lead cell in the highest term; 0 if none does.
func (c *Cluster) leaderOnce(ctx context.Context, cell string) int {
	best, bestTerm := 0, uint64(0)
	for id, st := range c.Statuses(ctx) {
		for _, rs := range st.Cells {
			if rs.Cell == cell && rs.Role == "leader" && rs.Term >= bestTerm {
				if rs.Term > bestTerm || best == 0 || id < best {
					best, bestTerm = id, rs.Term
				}
			}
		}
	}
	return best
}

func (c *Cluster) cellSpec(cell string) (CellSpec, error) {
	for _, cs := range c.opts.Cells {
		if cs.Name == cell {
			return cs, nil
		}
	}
	return CellSpec{}, fmt.Errorf("no cell %q in this cluster", cell)
}

// LeaderOf polls /v1/status until a running replica claims to lead cell
// (the highest term wins), for at most Options.LeaderTimeout. The leader
// Raft reports may not serve requests yet; WaitLeader waits for that.
func (c *Cluster) LeaderOf(cell string) (int, error) {
	if _, err := c.cellSpec(cell); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.LeaderTimeout)
	defer cancel()
	for attempt := 0; attempt < 100_000; attempt++ {
		if id := c.leaderOnce(ctx, cell); id != 0 {
			return id, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no leader of cell %s within %v", cell, c.opts.LeaderTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("no leader of cell %s", cell)
}

// WaitLeader waits, for at most timeout, until cell has a leader that
// serves requests (a linearizable get of the cell's first prefix succeeds on
// it), and returns its id.
func (c *Cluster) WaitLeader(cell string, timeout time.Duration) (int, error) {
	cs, err := c.cellSpec(cell)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	body, _ := json.Marshal(api.ReadRequest{Path: cs.Prefixes[0]})
	lastErr := fmt.Errorf("no replica claims to lead")
	for attempt := 0; attempt < 100_000; attempt++ {
		if id := c.leaderOnce(ctx, cell); id != 0 {
			if err := c.probe(ctx, id, body); err == nil {
				return id, nil
			} else {
				lastErr = fmt.Errorf("replica %d leads but does not serve: %w", id, err)
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no ready leader of cell %s within %v: %v", cell, timeout, lastErr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("no ready leader of cell %s: %v", cell, lastErr)
}

// WaitLeaders waits until every cell has a ready leader, for at most
// timeout in all, and returns cell → leader id.
func (c *Cluster) WaitLeaders(timeout time.Duration) (map[string]int, error) {
	deadline := time.Now().Add(timeout)
	out := map[string]int{}
	for _, cs := range c.opts.Cells {
		id, err := c.WaitLeader(cs.Name, time.Until(deadline))
		if err != nil {
			return out, err
		}
		out[cs.Name] = id
	}
	return out, nil
}

func (c *Cluster) probe(ctx context.Context, id int, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.Scheme()+"://"+c.APIAddr(id)+api.RouteGet, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return nil
}
