package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// testNotLeaderHint: every follower of every cell answers node and session
// routes with not_leader naming the leader's API address, and /v1/status
// on all five replicas shows exactly one leader per cell, agreed by all.
// A leader change in the middle (none is expected) restarts the check,
// within a bound.
func testNotLeaderHint(t *testing.T, c *cluster.Cluster) {
	cl := c.NewClient()
	defer cl.Close()
	for _, cell := range c.Cells() {
		var lastErr error
		for attempt := 0; attempt < 20; attempt++ {
			if lastErr = checkLeaderView(c, cl, cell); lastErr == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if lastErr != nil {
			t.Errorf("cell %s: %v", cell.Name, lastErr)
		}
	}
}

func checkLeaderView(c *cluster.Cluster, cl *cluster.Client, cell cluster.CellSpec) error {
	leader, err := c.WaitLeader(cell.Name, 10*time.Second)
	if err != nil {
		return err
	}
	want := c.APIAddr(leader)
	sts := c.Statuses(context.Background())
	if len(sts) != len(c.IDs()) {
		return fmt.Errorf("%d of %d replicas answered /v1/status", len(sts), len(c.IDs()))
	}
	leaders := 0
	for id, st := range sts {
		if st.ReplicaID != uint64(id) || st.APIAddr != c.APIAddr(id) {
			return fmt.Errorf("replica %d reports itself as %d at %s", id, st.ReplicaID, st.APIAddr)
		}
		var rs *api.ReplicaStatus
		for i := range st.Cells {
			if st.Cells[i].Cell == cell.Name {
				rs = &st.Cells[i]
			}
		}
		if rs == nil {
			return fmt.Errorf("replica %d does not report cell %s", id, cell.Name)
		}
		if rs.Role == "leader" {
			leaders++
		}
		if rs.LeaderID != uint64(leader) || rs.LeaderAPI != want {
			return fmt.Errorf("replica %d says %s is led by %d (%s), want %d (%s)", id, cell.Name, rs.LeaderID, rs.LeaderAPI, leader, want)
		}
		if (rs.Role == "leader") != (id == leader) {
			return fmt.Errorf("replica %d has role %s; the leader is %d", id, rs.Role, leader)
		}
	}
	if leaders != 1 {
		return fmt.Errorf("%d replicas claim to lead %s", leaders, cell.Name)
	}
	requests := []struct {
		route string
		body  any
	}{
		{api.RouteGet, api.ReadRequest{Path: cell.Prefixes[0]}},
		{api.RoutePut, api.PutRequest{Path: cell.Prefixes[0] + "/hint", Value: []byte("x")}},
		{api.RouteSessionOpen, api.OpenSessionRequest{Cell: cell.Name}},
		{api.RouteSessionKeepAlive, api.KeepAliveRequest{Cell: cell.Name, Session: 1}},
	}
	for _, id := range c.IDs() {
		if id == leader {
			continue
		}
		for _, r := range requests {
			body, _ := json.Marshal(r.body)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			status, resp, err := cl.Once(ctx, c.APIAddr(id), http.MethodPost, r.route, body, 0)
			cancel()
			if err != nil {
				return fmt.Errorf("%s on follower %d: %v", r.route, id, err)
			}
			var ae *api.Error
			e := cluster.DecodeError(status, resp)
			if !asAPIError(e, &ae) || ae.Code != api.CodeNotLeader || status != http.StatusServiceUnavailable {
				return fmt.Errorf("%s on follower %d: HTTP %d %s, want 503 not_leader", r.route, id, status, resp)
			}
			if ae.Leader != want {
				return fmt.Errorf("%s on follower %d: hint %q, want the leader %d at %s", r.route, id, ae.Leader, leader, want)
			}
		}
	}
	return nil
}

func asAPIError(err error, target **api.Error) bool {
	e, ok := err.(*api.Error)
	if ok {
		*target = e
	}
	return ok
}
