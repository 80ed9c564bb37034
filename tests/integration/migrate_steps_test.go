package integration_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// stepper drives a migration's steps by hand, as a driver would, through
// the lockds' admin API.
type stepper struct {
	t      *testing.T
	cl     *cluster.Client
	prefix string
}

// dirStep commits one migration step in the directory.
func (s stepper) dirStep(req api.MigrateRequest) (api.PrefixInfo, error) {
	req.Prefix = s.prefix
	var resp struct {
		Prefix *api.PrefixInfo `json:"prefix"`
	}
	err := do(s.cl, api.RouteAdminMigrate, req, &resp)
	if err != nil || resp.Prefix == nil {
		return api.PrefixInfo{}, err
	}
	return *resp.Prefix, nil
}

// cellOp runs one prefix operation on a cell's leader.
func (s stepper) cellOp(req api.PrefixOpRequest) (api.PrefixOpResponse, error) {
	req.Prefix = s.prefix
	var resp api.PrefixOpResponse
	err := do(s.cl, api.RouteAdminPrefixOp, req, &resp)
	return resp, err
}

// export reads every page of the sealed prefix from cell, limit nodes a page.
func (s stepper) export(cell string, limit int) [][]api.ExportedNode {
	s.t.Helper()
	var pages [][]api.ExportedNode
	after := ""
	for i := 0; i < 10_000; i++ {
		r, err := s.cellOp(api.PrefixOpRequest{Cell: cell, Op: api.PrefixExport, After: after, Limit: limit})
		must(s.t, err)
		pages = append(pages, r.Nodes)
		if !r.More {
			return pages
		}
		after = r.Nodes[len(r.Nodes)-1].Path
	}
	s.t.Fatal("export never ended")
	return nil
}

// stage sends page i of pages to cell under generation gen.
func (s stepper) stage(cell string, epoch, gen uint64, pages [][]api.ExportedNode, i int) (api.PrefixOpResponse, error) {
	return s.cellOp(api.PrefixOpRequest{Cell: cell, Op: api.PrefixStage, Epoch: epoch, Gen: gen, Page: uint64(i), First: i == 0, Last: i == len(pages)-1, Nodes: pages[i]})
}

// beginAndSeal begins a move of the stepper's prefix from demo to cell3
// as driver, seals it on demo and records the seal.
func (s stepper) beginAndSeal(driver string) (api.Migration, api.PrefixOpResponse) {
	s.t.Helper()
	pi, err := s.dirStep(api.MigrateRequest{Action: api.MigrateBegin, To: "cell3", Driver: driver})
	must(s.t, err)
	m := *pi.Migration
	seal, err := s.cellOp(api.PrefixOpRequest{Cell: "demo", Op: api.PrefixSeal, To: "cell3", DirIndex: m.BeganAt})
	must(s.t, err)
	_, err = s.dirStep(api.MigrateRequest{Action: api.MigrateSealed, BeganAt: m.BeganAt, Driver: driver, SealIndex: seal.Index, Nodes: seal.Count, Digest: seal.Digest})
	must(s.t, err)
	return m, seal
}

// TestMigrationLatePageRefused (issue 23, finding 1): a driver taken over
// is stopped at its next step, in the directory and on the new cell: a
// late page of its copy cannot touch the newer driver's, nor can its
// commit land; the newer driver's copy moves every key.
func TestMigrationLatePageRefused(t *testing.T) {
	t.Parallel()
	c, admin := manyCells(t)
	ctx, cancel := ctxFor(5 * time.Minute)
	defer cancel()
	_, err := admin.AssignPrefix(ctx, "/late", "demo")
	must(t, err)
	const keys = 600
	fillPrefix(t, admin, "/late", keys)
	s := stepper{t: t, cl: c.NewClient(), prefix: "/late"}
	m, seal := s.beginAndSeal("driver-A")
	pages := s.export("demo", 100)
	epoch := uint64(2)
	for i := 0; i < 3; i++ {
		_, err := s.stage("cell3", epoch, m.Gen, pages, i)
		must(t, err)
	}
	if _, err := s.dirStep(api.MigrateRequest{Action: api.MigrateBegin, To: "cell3", Driver: "driver-B"}); api.CodeOf(err) != api.CodeMigrationInProgress {
		t.Fatalf("a second driver's begin: %v, want migration_in_progress", err)
	}
	pi, err := s.dirStep(api.MigrateRequest{Action: api.MigrateBegin, To: "cell3", Driver: "driver-B", TakeOver: true})
	must(t, err)
	b := *pi.Migration
	if b.Driver != "driver-B" || b.Gen <= m.Gen {
		t.Fatalf("take-over: %+v", b)
	}
	for i := 0; i < 3; i++ {
		_, err := s.stage("cell3", epoch, b.Gen, pages, i)
		must(t, err)
	}
	// A's next page, and A's first page again, land late on B's copy:
	// both refused.
	for _, i := range []int{3, 0} {
		if _, err := s.stage("cell3", epoch, m.Gen, pages, i); api.CodeOf(err) != api.CodeMigrationInProgress {
			t.Fatalf("page %d of the driver taken over, on the newer driver's copy: %v, want migration_in_progress", i, err)
		}
	}
	t.Logf("pages of the driver taken over: refused on cell3 (migration_in_progress)")
	var last api.PrefixOpResponse
	for i := 3; i < len(pages); i++ {
		last, err = s.stage("cell3", epoch, b.Gen, pages, i)
		must(t, err)
	}
	if _, err := s.dirStep(api.MigrateRequest{Action: api.MigrateCommit, BeganAt: m.BeganAt, Driver: "driver-A", Nodes: last.Count, Digest: last.Digest}); api.CodeOf(err) != api.CodeMigrationInProgress {
		t.Fatalf("the commit of the driver taken over: %v, want migration_in_progress", err)
	}
	if last.Count != seal.Count || last.Digest != seal.Digest {
		t.Fatalf("copy %d nodes %s, seal %d %s", last.Count, last.Digest, seal.Count, seal.Digest)
	}
	_, err = s.dirStep(api.MigrateRequest{Action: api.MigrateCommit, BeganAt: m.BeganAt, Driver: "driver-B", Nodes: last.Count, Digest: last.Digest})
	must(t, err)
	_, err = admin.MovePrefix(ctx, "/late", "cell3", nil) // finishes it: serve, drop, end
	must(t, err)
	oneOwner(t, c, admin, "/late", "cell3")
	if got := countKeys(t, admin, "/late", keys); got != keys {
		t.Fatalf("%d of %d keys after the move", got, keys)
	}
}

// TestMigrationCopyVerified (issue 23, finding 1): a commit whose copy is
// not the sealed source (a page missing) is refused, copy_mismatch, and
// changes nothing; the same migration then moves every key.
func TestMigrationCopyVerified(t *testing.T) {
	t.Parallel()
	c, admin := manyCells(t)
	ctx, cancel := ctxFor(5 * time.Minute)
	defer cancel()
	_, err := admin.AssignPrefix(ctx, "/verify", "demo")
	must(t, err)
	const keys = 300
	fillPrefix(t, admin, "/verify", keys)
	s := stepper{t: t, cl: c.NewClient(), prefix: "/verify"}
	m, seal := s.beginAndSeal("driver-A")
	pages := s.export("demo", 100)
	short := [][]api.ExportedNode{pages[0], pages[2]} // page 1 lost on the way
	for i := range short {
		_, err := s.stage("cell3", 2, m.Gen, short, i)
		must(t, err)
	}
	last, err := s.cellOp(api.PrefixOpRequest{Cell: "cell3", Op: api.PrefixStage, Epoch: 2, Gen: m.Gen, Page: 1, Last: true, Nodes: short[1]})
	must(t, err)
	t.Logf("seal: %d nodes %s; short copy: %d nodes %s", seal.Count, seal.Digest, last.Count, last.Digest)
	must(t, admin.RefreshDirectory(ctx))
	before, _ := admin.Directory().Prefix("/verify")
	_, err = s.dirStep(api.MigrateRequest{Action: api.MigrateCommit, BeganAt: m.BeganAt, Driver: "driver-A", Nodes: last.Count, Digest: last.Digest})
	if api.CodeOf(err) != api.CodeCopyMismatch {
		t.Fatalf("the commit of a copy missing a page: %v, want copy_mismatch", err)
	}
	t.Logf("commit of the short copy: %v", err)
	must(t, admin.RefreshDirectory(ctx))
	after, _ := admin.Directory().Prefix("/verify")
	if b, a := mustJSON(t, before), mustJSON(t, after); b != a {
		t.Fatalf("a refused commit changed the directory: %s → %s", b, a)
	}
	// The driver's process is gone; another takes over and copies anew.
	_, err = admin.MovePrefix(ctx, "/verify", "cell3", nil)
	if api.CodeOf(err) != api.CodeMigrationInProgress {
		t.Fatalf("a second driver without --take-over: %v", err)
	}
	_, err = admin.MovePrefix(ctx, "/verify", "cell3", nil, sdk.TakeOver())
	must(t, err)
	oneOwner(t, c, admin, "/verify", "cell3")
	if got := countKeys(t, admin, "/verify", keys); got != keys {
		t.Fatalf("%d of %d keys after the move", got, keys)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}
