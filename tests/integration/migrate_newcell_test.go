package integration_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestMigrateToANewCellAtOnce (issue 23, finding 2): a cell is created
// and, at once, a prefix is moved to it by a new client (as lockctl
// started a moment later) whose only endpoint is lockd 6, which hosts no
// directory replica and follows the directory by polling it. Its view,
// and so the client's, may not name the new cell yet: the client must
// read the directory again (from a replica of it) rather than refuse
// with wrong_cell and leave the prefix sealed. Every key must read back
// from the new cell. Two rounds, each to a cell created just before.
//
// Clients whose directory predates the cell (one direct, one through a
// lockproxy whose view predates it too) open a session on the new cell
// at once: a call naming a cell the view lacks reads the directory
// again before it is refused.
//
// Mutants: lockd_broken_dirviewread (a lockd without a directory
// replica answers GET /v1/directory from its lagging view) fails the
// move; mutant sdk_broken_nocellrefresh on the test binary (the SDK
// refuses an unknown cell at once) fails the early clients' sessions.
func TestMigrateToANewCellAtOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("six lockds and two cells created")
	}
	c := cluster.Start(t, cluster.Options{Lockds: 6, Zones: 3, Lease: 5 * time.Second})
	admin := newSDKClient(t, c)
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	for registered := 0; registered < 6; {
		must(t, admin.RefreshDirectory(ctx))
		registered = 0
		for _, l := range admin.Directory().Lockds {
			if l.Zone != "" {
				registered++
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("lockds registered with a zone: %d of 6", registered)
		}
		time.Sleep(50 * time.Millisecond)
	}
	startProxies(t, c, 1)
	_, err := admin.AssignPrefix(ctx, "/bulk", "demo")
	must(t, err)
	const keys = 50
	for i := range keys {
		_, err := admin.Put(ctx, fmt.Sprintf("/bulk/k%03d", i), []byte(fmt.Sprint(i)), sdk.MakeParents())
		must(t, err)
	}
	for round, cell := range []string{"cell4", "cell5"} {
		early := newSDKClient(t, c)
		earlyProxied := proxyClient(t, c, 5*time.Second)
		_, err := admin.CreateCell(ctx, api.CreateCellRequest{Name: cell})
		must(t, err)
		created := time.Now()
		late, err := sdk.New(ctx, sdk.Config{Endpoints: []string{c.APIAddr(6)}, Direct: true, RequestTimeout: 5 * time.Second})
		must(t, err)
		known := false
		for _, ci := range late.Directory().Cells {
			known = known || ci.Name == cell
		}
		res, err := late.MovePrefix(ctx, "/bulk", cell, nil)
		_ = late.Close()
		if err != nil {
			t.Fatalf("round %d: move of /bulk to %s, created %v before (lockd 6's view named it: %v): %v",
				round, cell, time.Since(created).Round(time.Millisecond), known, err)
		}
		t.Logf("round %d: /bulk moved %s → %s %v after the cell's create (lockd 6's view named it at first: %v): %d nodes, refusing writes %v",
			round, res.From, res.To, time.Since(created).Round(time.Millisecond), known, res.Nodes, res.Refusing.Round(time.Millisecond))
		must(t, admin.RefreshDirectory(ctx))
		if got, err := admin.CellFor("/bulk/k000"); err != nil || got != cell {
			t.Fatalf("round %d: /bulk served by %q (%v), want %s", round, got, err, cell)
		}
		for i := range keys {
			n, err := admin.Get(ctx, fmt.Sprintf("/bulk/k%03d", i))
			if err != nil || string(n.Value) != fmt.Sprint(i) {
				t.Fatalf("round %d: /bulk/k%03d after the move: %q %v", round, i, n.Value, err)
			}
		}
		for _, cl := range []struct {
			name string
			c    *sdk.Client
		}{{"direct", early}, {"through a proxy", earlyProxied}} {
			if _, err := cl.c.Session(ctx, cell); err != nil {
				t.Fatalf("round %d: a client (%s) whose directory predates %s: session on it %v after its create: %v",
					round, cl.name, cell, time.Since(created).Round(time.Millisecond), err)
			}
		}
		t.Logf("round %d: sessions on %s from clients older than it, direct and through a proxy, %v after its create",
			round, cell, time.Since(created).Round(time.Millisecond))
	}
}
