package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestStatusPageInChromium opens lockd's status page in headless Chromium
// (driven with chromedp) on three real lockds: the cells table names each
// cell's leader, the lockds table lists all three, and for a lock with a
// holder and two waiters the page shows the holder's token and the queue
// in order, though the lockd serving the page does not lead the lock's
// cell. No script error may occur. The screenshot is kept in
// tests/integration/out/status-page.png.
func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	bin := cluster.ChromiumPath(t)
	c := cluster.Start(t, cluster.Options{Replicas: 3})
	cl := c.NewClient()
	mustDo(t, cl, api.RoutePut, api.PutRequest{Path: "/demo/status/lock", Value: []byte{}, MakeParents: true}, nil)
	var grants []api.CreateResponse
	for _, mode := range []api.LockMode{api.LockExclusive, api.LockShared, api.LockExclusive} {
		s := openSession(t, cl, "demo", 10*time.Second)
		s.keepAlive(2 * time.Second)
		defer func() { _ = s.close() }()
		var cr api.CreateResponse
		mustDo(t, cl, api.RouteCreate, api.CreateRequest{WriteHeader: s.header(), Path: "/demo/status/lock/n-", Ephemeral: true, Sequential: true, Lock: mode}, &cr)
		grants = append(grants, cr)
	}
	leader, err := c.WaitLeader("demo", 30*time.Second)
	must(t, err)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "profile")), chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	var scriptErrors []string
	must(t, chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			scriptErrors = append(scriptErrors, e.ExceptionDetails.Text)
			mu.Unlock()
		}
	}))

	// The page is served by a lockd that does not lead demo: it asks the
	// leader for the lock's queue.
	page := leader%3 + 1
	url := "http://" + c.APIAddr(page) + api.RouteStatusPage + "#/demo/status/lock"
	err = chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`#cells tbody tr`)),
		chromedp.WaitVisible(chromedp.CSS(`#lock tbody tr:nth-child(3)`)),
	)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text := func(sel string) string {
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	cells, lockds, lock := text(`#cells`), text(`#lockds`), text(`#lock`)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100) /* 100: PNG */)
	must(t, err)
	keep := filepath.Join("out", "status-page.png")
	if err := os.MkdirAll("out", 0o755); err == nil && os.WriteFile(keep, shot, 0o644) == nil {
		t.Logf("screenshot kept in tests/integration/%s (%d bytes)", keep, len(shot))
	}
	t.Logf("cells:\n%s\nlockds:\n%s\nlock:\n%s", cells, lockds, lock)

	if want := fmt.Sprintf("lockd %d (%s)", leader, c.APIAddr(leader)); !strings.Contains(cells, "demo") || !strings.Contains(cells, want) {
		t.Errorf("the cells table does not name demo's leader %q:\n%s", want, cells)
	}
	if !strings.Contains(cells, "payments") {
		t.Errorf("the cells table lacks payments:\n%s", cells)
	}
	for id := 1; id <= 3; id++ {
		if !strings.Contains(lockds, c.APIAddr(id)) {
			t.Errorf("the lockds table lacks lockd %d (%s):\n%s", id, c.APIAddr(id), lockds)
		}
	}
	rows := strings.Split(strings.TrimSpace(lock), "\n")
	if len(rows) != 4 { // header and three entries
		t.Fatalf("the lock table has %d rows, want 4:\n%s", len(rows), lock)
	}
	holder := rows[1]
	if !strings.HasPrefix(holder, "holder") || !strings.Contains(holder, grants[0].Node.Path) || !strings.Contains(holder, fmt.Sprint(grants[0].Token)) {
		t.Errorf("holder row %q: want %s with token %d", holder, grants[0].Node.Path, grants[0].Token)
	}
	for i, g := range grants[1:] {
		if r := rows[2+i]; !strings.HasPrefix(r, "waiter") || !strings.Contains(r, g.Node.Path) || !strings.Contains(r, string(g.Node.Lock)) {
			t.Errorf("waiter row %d %q: want %s (%s)", i+1, r, g.Node.Path, g.Node.Lock)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(scriptErrors) > 0 {
		t.Errorf("script errors on the page: %v", scriptErrors)
	}
}
