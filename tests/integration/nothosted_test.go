package integration_test

// Issue 23 (run 231209 of the fault suite): a move's step sent to a lockd
// that no longer hosts the target cell (a restore placed it elsewhere) was
// refused wrong_cell, and the move stopped half-way. A lockd that knows
// the cell but hosts no replica of it reads the directory once, then
// answers not_leader naming a replica that does, which every client
// follows.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
//
// Then (the fault suite's run 251207: a move to a cell created a moment
// before stopped half-way on wrong_cell "no cell fresh1" from a lockd
// whose view had not caught up) a cell no view lists is asked for, on a
// lockd and through a lockproxy, by a client that says it routed by a
// later directory (api.HeaderDirectoryIndex): both must answer
// unavailable, not applied (send again), and wrong_cell to a client
// without the header or with an older index. Mutants
// lockd_broken_viewbehind and lockproxy_broken_viewbehind (wrong_cell
// regardless) fail it.
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

	p := startProxies(t, c, 1)[0]
	view := admin.Directory().Index
	for _, ep := range []struct{ what, addr string }{{"lockd", outside}, {"lockproxy", p.Addr}} {
		for _, tc := range []struct {
			header     string
			code       api.Code
			notApplied bool
		}{
			{"", api.CodeWrongCell, false},
			{"1", api.CodeWrongCell, false}, // not ahead of any view
			{fmt.Sprint(view + 1000), api.CodeUnavailable, true},
			{"x", api.CodeBadRequest, false},
		} {
			got := askUnknownCell(t, ep.addr, tc.header)
			if got.Code != tc.code || got.NotApplied != tc.notApplied {
				t.Fatalf("%s %s, a cell no view lists, client at directory index %q (the view's is about %d): %+v; want %s, not_applied %v",
					ep.what, ep.addr, tc.header, view, got, tc.code, tc.notApplied)
			}
		}
	}
}

// askUnknownCell reads a node of cell "fresh-unknown" (which no directory
// lists) at addr, saying directory index header ("" none), and returns
// the error answered.
func askUnknownCell(t *testing.T, addr, header string) api.Error {
	t.Helper()
	body, _ := json.Marshal(api.ReadRequest{Path: "/demo/nothosted/k"})
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+api.RouteGet, bytes.NewReader(body))
	must(t, err)
	req.Header.Set(api.HeaderCell, "fresh-unknown")
	if header != "" {
		req.Header.Set(api.HeaderDirectoryIndex, header)
	}
	hc := http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	must(t, err)
	defer resp.Body.Close()
	var reply struct {
		Error api.Error `json:"error"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &reply); err != nil {
		t.Fatalf("%s answered %d %s", addr, resp.StatusCode, b)
	}
	return reply.Error
}
