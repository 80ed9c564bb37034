package statuspage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// populate gives the page something to show: a lockproxy, a tenant (web,
// with a quota) holding a lock and a few nodes through the proxy, and
// movePrefix on demo with moveNodes nodes.
func (e *env) populate() {
	e.t.Helper()
	p, err := e.c.StartProxy("proxy-1")
	e.must(err)
	e.proxy = p
	tr, err := e.admin.PutTenant(e.ctx, api.Tenant{Name: "web",
		Grants: []api.Grant{{Prefix: "/demo/web", Roles: []api.Role{api.RoleRead, api.RoleWrite, api.RoleLock}}},
		Quota:  api.Quota{Sessions: 20, Nodes: 200, Bytes: 1 << 20}}, true)
	e.must(err)
	_, err = e.admin.Put(e.ctx, "/demo/web", []byte{}, sdk.MakeParents())
	e.must(err)
	e.tenantToken = tr.Token
	web := e.client(tr.Token, false)
	if !web.ViaProxies() {
		e.t.Fatal("the tenant's client does not go through the proxy")
	}
	for i := range 12 {
		_, err := web.Put(e.ctx, fmt.Sprintf("/demo/web/config-%02d", i), []byte(strings.Repeat("v", 200)))
		e.must(err)
	}
	e.must(web.NewMutex(e.lockPath).Lock(e.ctx))

	e.fillMovePrefix()
}

// fillMovePrefix assigns movePrefix to demo and writes moveNodes nodes
// under it, a transaction at a time.
func (e *env) fillMovePrefix() {
	e.t.Helper()
	_, err := e.admin.AssignPrefix(e.ctx, movePrefix, "demo")
	e.must(err)
	for i := 0; i < moveNodes; i += api.MaxTxnOps {
		var ops []api.TxnOp
		for j := i; j < min(i+api.MaxTxnOps, moveNodes); j++ {
			op := sdk.PutOp(fmt.Sprintf("%s/order-%04d", movePrefix, j), []byte("placed"))
			op.MakeParents = true
			ops = append(ops, op)
		}
		// demo's leader serves the prefix once it reads the directory
		// that assigns it: until then, wrong_cell.
		deadline := time.Now().Add(assignWait)
		for {
			_, err := e.admin.Txn(e.ctx).Then(ops...).Commit(e.ctx)
			if api.CodeOf(err) != api.CodeWrongCell || time.Now().After(deadline) {
				e.must(err)
				break
			}
			time.Sleep(pollEvery)
		}
	}
}

// openPage opens lockd pageLockd's /status in Chromium (presenting the
// cluster's client certificate under TLS): without a token it must say
// it needs an admin's, and with the tenant's that it is not an admin's;
// then the admin token is typed into the form.
func (e *env) openPage(useTLS bool) *browser {
	e.t.Helper()
	var origins []string
	for _, id := range e.c.IDs() {
		origins = append(origins, e.c.Scheme()+"://"+e.c.APIAddr(id))
	}
	opts := browserOptions{}
	if useTLS {
		opts = clientCertBrowser(e.t, e.c.ClientTLS(), origins)
	}
	b := newBrowser(e.t, opts)
	b.navigate(origins[pageLockd-1] + api.RouteStatusPage)
	b.waitFor("the API's refusal without a token", `document.querySelector('#error').innerText.includes("unauthorized")`, showWait)
	if useTLS {
		// Refused for its token, not for a missing client certificate
		// (the API's first check): the browser presented one.
		if msg := b.text("#error"); strings.Contains(msg, "client certificate") {
			e.t.Fatalf("the browser presented no client certificate: %s", msg)
		}
		if proto := eval[string](b, `location.protocol`); proto != "https:" {
			e.t.Fatalf("the page was loaded over %s, want https:", proto)
		}
	}
	wantContains(e.t, "without a token", b.text("#error"), "needs an admin token")
	b.useToken(e.tenantToken)
	b.waitFor("the refusal of a tenant's token", `document.querySelector('#error').innerText.includes("forbidden")`, showWait)
	wantContains(e.t, "with a tenant's token", b.text("#error"), "not an admin's")
	b.useToken(adminToken)
	b.waitFor("the cells", `document.querySelector('#cells tr[data-cell="payments"]')`, showWait)
	return b
}

// loadCodes are the reasons a healthy cluster on a loaded machine can
// show: figures over the spec's targets, not a fault.
var loadCodes = []string{api.ReasonCommitSlow, api.ReasonFsyncSlow, api.ReasonExpiries, api.ReasonProxyBehind}

// waitHealthy waits until the page shows every cell's replicas up and no
// problem but load, then (at most okWait, or screenshotOKWait when the
// docs' screenshot is taken) until it shows the level ok.
func (e *env) waitHealthy(b *browser) {
	e.t.Helper()
	codes, _ := json.Marshal(loadCodes)
	b.waitFor("every replica up and no fault", `document.querySelectorAll('#cells tr[data-cell]').length === 2 &&
		[...document.querySelectorAll('#cells tr[data-cell]')].every((r) => r.innerText.includes("5 / 5")) &&
		[...document.querySelectorAll('#problems tbody tr[data-code]')].every((r) => `+string(codes)+`.includes(r.dataset.code))`, healthyWait)
	wait := okWait
	if os.Getenv("LOCKD_WRITE_SCREENSHOTS") == "1" {
		wait = screenshotOKWait
	}
	if err := b.poll(`document.querySelector('#level').dataset.level === "ok"`, wait); err != nil {
		if wait == screenshotOKWait {
			e.t.Fatalf("the cluster did not look healthy within %v: no screenshot of a healthy cluster:\n%s", wait, b.text("#problems"))
		}
		e.t.Logf("the level is not ok after %v, from load alone (this machine's commits and fsyncs are over the spec's targets):\n%s", wait, b.text("#problems"))
	}
}

// checkHealthy reads the healthy cluster's page: each cell with the
// leader the harness finds and every replica up, every lockd up, the
// proxy, the tenant, and a lock's holder through the "A lock" form. With
// the level ok, "All healthy" and no problems.
func (e *env) checkHealthy(b *browser) {
	t := e.t
	t.Helper()
	ok := b.text("#level") == "✓ ok"
	if ok && (!b.visible("#allhealthy") || b.visible("#problems")) {
		t.Errorf("healthy: want \"All healthy\" and no problems:\n%s", b.text("header"))
	}
	for _, cell := range []string{"demo", "payments"} {
		leader, err := e.c.LeaderOf(cell)
		e.must(err)
		row := `#cells tr[data-cell="` + cell + `"]`
		wantContains(t, "cell "+cell, b.text(row), fmt.Sprintf("lockd %d (%s)", leader, e.c.APIAddr(leader)), "5 / 5", "z1", "z2", "z3")
		if ok {
			wantContains(t, "badge of "+cell, b.text(row+" .badge"), "ok")
		}
		if downs := b.texts(row + " .rep.down"); len(downs) > 0 {
			t.Errorf("cell %s: replicas marked down on a healthy cluster: %q", cell, downs)
		}
	}
	lockds := b.texts("#lockds tr[data-lockd]")
	if len(lockds) != 5 {
		t.Errorf("lockds: %d rows, want 5: %q", len(lockds), lockds)
	}
	for _, id := range e.c.IDs() {
		wantContains(t, fmt.Sprintf("lockd %d", id), b.text(fmt.Sprintf(`#lockds tr[data-lockd="%d"]`, id)), e.c.APIAddr(id), "answered", "up")
	}
	wantContains(t, "proxy", b.text(`#proxies tr[data-proxy="`+e.proxy.Addr+`"]`), "answering", "demo: 1 session")
	wantContains(t, "leader changes", b.text("#leaderchanges tbody"), "ago", "lockd")
	wantContains(t, "last refresh", b.text("#updated"), "updated", "ago")
	wantContains(t, "tenant web", b.text(`#tenants tr[data-tenant="web"]`), "demo", "/ 20 (", "/ 200 (")

	b.do("show a lock", chromedp.SendKeys(chromedp.ID("lockpath"), e.lockPath+"\r"))
	b.waitFor("the lock's holder", `document.querySelector('#lock tbody tr') && !document.querySelector('#lock').hidden`, showWait)
	wantContains(t, "the lock", b.text("#lock tbody tr"), "holder", e.lockPath+"/")
}

// victims picks, among the lockds other than the page's, one to kill and
// one whose disk turns slow, leaders of no cell when possible (a slow
// leader's commits are slow too, a concern of its own).
func (e *env) victims() (down, slow int) {
	e.t.Helper()
	leads := map[int]bool{}
	for _, cell := range []string{"demo", "payments"} {
		id, err := e.c.LeaderOf(cell)
		e.must(err)
		leads[id] = true
	}
	var others []int
	for _, id := range e.c.IDs() {
		if id != pageLockd {
			others = append(others, id)
		}
	}
	// Non-leaders first, in id order: at least two of four are.
	var ordered []int
	for _, lead := range []bool{false, true} {
		for _, id := range others {
			if leads[id] == lead {
				ordered = append(ordered, id)
			}
		}
	}
	return ordered[0], ordered[1]
}

// moveInFlight begins moving movePrefix from demo to payments with a
// driver that stops after the copy's first page (a driver that died part
// way): it returns once the page is staged; the driver is stopped when the
// test ends.
func (e *env) moveInFlight() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	reached, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	var once sync.Once
	go func() {
		_, err := e.admin.MovePrefix(ctx, movePrefix, "payments", func(p sdk.MoveProgress) {
			if p.Step == "copying" {
				once.Do(func() { close(reached) })
				<-release
			}
		})
		done <- err
	}()
	e.t.Cleanup(func() {
		cancel() // first: released, the driver must not go on
		close(release)
		select {
		case <-done:
		case <-time.After(moveStopWait):
			e.t.Errorf("the move's driver did not stop within %v", moveStopWait)
		}
	})
	select {
	case <-reached:
	case err := <-done:
		e.t.Fatalf("the move of %s ended before its copy: %v", movePrefix, err)
	case <-time.After(moveWait):
		e.t.Fatalf("the move of %s did not reach its copy within %v", movePrefix, moveWait)
	}
}
