package integration_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestLeadersSpread: with every cell's leadership moved onto lockd 1, the
// directory's leader hands them out again until no lockd leads more than
// one of the four cells (six lockds).
func TestLeadersSpread(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{Lockds: 6, Zones: 3, Lease: 5 * time.Second, BalanceLeaders: true})
	admin := newSDKClient(t, c)
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	for _, name := range []string{"cell3", "cell4"} {
		_, err := admin.CreateCell(ctx, api.CreateCellRequest{Name: name})
		must(t, err)
		_, err = admin.AssignPrefix(ctx, "/"+name, name)
		must(t, err)
	}
	cells := []string{"demo", "payments", "cell3", "cell4"}
	// Every cell to lockd 1 (each is on lockds 1-5, or placed with 1).
	for _, cell := range cells {
		for attempt := 0; attempt < 100; attempt++ {
			if leaderByStatus(t, c, cell) == 1 {
				break
			}
			askCellLeader(t, c, cell, api.TransferRequest{Cell: cell, To: 1})
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("every cell led by lockd 1 at some point; waiting for the balancer")
	var leads map[int]int
	for attempt := 0; attempt < 120; attempt++ {
		leads = map[int]int{}
		for _, cell := range cells {
			leads[leaderByStatus(t, c, cell)]++
		}
		spread := true
		for _, n := range leads {
			spread = spread && n <= 1
		}
		if spread {
			t.Logf("leaderships by lockd: %v", leads)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("leaderships not spread after a minute: %v", leads)
}

// askCellLeader sends a transfer request to every lockd (the cell's
// leader acts on it; the others answer not_leader).
func askCellLeader(t *testing.T, c *cluster.Cluster, cell string, req api.TransferRequest) {
	t.Helper()
	b, _ := json.Marshal(req)
	for _, ep := range c.Endpoints() {
		resp, err := http.Post(fmt.Sprintf("http://%s%s", ep, api.RouteAdminTransfer), "application/json", bytes.NewReader(b))
		if err == nil {
			resp.Body.Close()
		}
	}
}
