package integration_test

// Issue 23 (run 231209 of the fault suite): a move's step sent to a lockd
// that no longer hosts the target cell (a restore placed it elsewhere) was
// refused wrong_cell, and the move stopped half-way. A lockd that knows
// the cell but hosts no replica of it reads the directory once, then
// answers not_leader naming a replica that does, which every client
// follows.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestNotHostedCellNamesAReplica asks the one lockd of six that hosts no
// replica of demo for a demo node: the answer must be not_leader with a
// hint among demo's replicas. mutant lockd_broken_nohosthint (wrong_cell,
// no hint) fails it.
func TestNotHostedCellNamesAReplica(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{Lockds: 6, Zones: 3})
	op := noCacheClient(t, c)
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	_, err := op.Put(ctx, "/demo/nothosted/k", []byte("v"), sdk.MakeParents())
	must(t, err)
	admin, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints()})
	must(t, err)
	defer admin.Close()
	dir := admin.Directory()
	var demo []string
	for _, ci := range dir.Cells {
		if ci.Name == "demo" {
			demo = ci.Endpoints
		}
	}
	outside := ""
	for _, ep := range c.Endpoints() {
		if !slices.Contains(demo, ep) {
			outside = ep
		}
	}
	if outside == "" {
		t.Fatalf("every lockd hosts demo (%v)", demo)
	}
	body, _ := json.Marshal(api.ReadRequest{Path: "/demo/nothosted/k"})
	status, b, err := c.NewClient().Once(context.Background(), outside, http.MethodPost, api.RouteGet, body, 10*time.Second)
	must(t, err)
	var reply struct {
		Error api.Error `json:"error"`
	}
	_ = json.Unmarshal(b, &reply)
	if reply.Error.Code != api.CodeNotLeader || !slices.Contains(demo, reply.Error.Leader) {
		t.Fatalf("a lockd without demo answered %d %s; want not_leader naming one of %v", status, b, demo)
	}
	t.Logf("lockd %s: %s", outside, b)
}
