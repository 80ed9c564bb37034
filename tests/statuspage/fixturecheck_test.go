package statuspage

import (
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
)

// checkHealthy reads the healthy fixture's page.
func checkHealthy(t *testing.T, b *browser) {
	t.Helper()
	wantContains(t, "cluster level", b.text("#level"), "ok")
	if !b.visible("#allhealthy") || b.visible("#problems") {
		t.Errorf("healthy: want \"All healthy\" shown and no problems table; header reads:\n%s", b.text("header")+b.text("main section"))
	}
	wantContains(t, "all healthy", b.text("#allhealthy"), "All healthy")
	if rows := b.texts("#cells tr[data-cell]"); len(rows) != 2 {
		t.Errorf("cells: %d rows, want 2: %q", len(rows), rows)
	}
	wantContains(t, "cell demo", b.text(`#cells tr[data-cell="demo"]`), "lockd 2 (127.0.0.1:7002)", "5 / 5", "/demo", "1,240", "5,310", "3.40 ms")
	wantContains(t, "cell payments", b.text(`#cells tr[data-cell="payments"]`), "lockd 3 (127.0.0.1:7003)", "/payments /orders")
	for _, cell := range []string{"demo", "payments"} {
		wantContains(t, "badge of "+cell, b.text(`#cells tr[data-cell="`+cell+`"] .badge`), "ok")
	}
	zones := b.texts(`#cells tr[data-cell="demo"] .zone`)
	if len(zones) != 3 {
		t.Fatalf("demo's replicas: %d zones, want 3: %q", len(zones), zones)
	}
	wantContains(t, "zone z1 of demo", zones[0], "z1", "1 follower", "4 follower")
	wantContains(t, "zone z2 of demo", zones[1], "z2", "2 leader", "5 follower")
	if downs := b.texts(".rep.down"); len(downs) != 0 {
		t.Errorf("healthy: replicas marked down: %q", downs)
	}
	wantContains(t, "leader changes", b.text("#leaderchanges tbody tr"), "2 min ago", "7", "lockd")
	wantContains(t, "moves", b.text("#moves"), "no moves in flight")
	wantContains(t, "proxy", b.text(`#proxies tr[data-proxy="127.0.0.1:7201"]`), "31", "1,800", "demo: 1,000 sessions, batch 420 ms ago", "answering")
	if rows := b.texts("#lockds tr[data-lockd]"); len(rows) != 6 {
		t.Errorf("lockds: %d rows, want 6: %q", len(rows), rows)
	}
	learner := `#cells tr[data-cell="payments"] .rep.learner[data-lockd="6"]`
	wantContains(t, "payments' learner", b.text(learner), "6 follower (learner)")
	wantContains(t, "payments' zone z3", b.texts(`#cells tr[data-cell="payments"] .zone`)[2], "z3", "3 leader", "6 follower (learner)")
	wantContains(t, "lockd 1", b.text(`#lockds tr[data-lockd="1"]`), "127.0.0.1:7001", "z1", "v1.4.0", "leader", "answered 300 ms ago", "up")
	if !b.visible("#tenants") {
		t.Errorf("the tenants table is hidden for an admin")
	}
	wantContains(t, "tenant web", b.text(`#tenants tr[data-tenant="web"]`), "demo", "420 / 2,000 (21%)", "2,100 / 10,000 (21%)", "3.0 MiB / 64 MiB (5%)")
	wantContains(t, "tenant batch", b.text(`#tenants tr[data-tenant="batch"]`), "holds nothing")
}

// checkDegraded reads the degraded fixture's page: what is wrong first,
// then each place that shows it.
func checkDegraded(t *testing.T, b *browser) {
	t.Helper()
	wantContains(t, "cluster level", b.text("#level"), "degraded")
	if b.visible("#allhealthy") || !b.visible("#problems") {
		t.Errorf("degraded: want the problems table and no \"All healthy\"")
	}
	rows := b.texts("#problems tbody tr")
	want := degradedFixture(time.Time{}).Problems
	if len(rows) != len(want) {
		t.Errorf("problems: %d rows, want %d:\n%s", len(rows), len(want), strings.Join(rows, "\n"))
	}
	for _, p := range want {
		if !anyContains(rows, p.Subject, p.Message, string(p.Level), p.Code) {
			t.Errorf("no problem row shows %s %q (%s, %s):\n%s", p.Subject, p.Message, p.Level, p.Code, strings.Join(rows, "\n"))
		}
	}
	for _, cell := range []string{"demo", "payments"} {
		wantContains(t, "badge of "+cell, b.text(`#cells tr[data-cell="`+cell+`"] .badge`), "degraded")
		wantContains(t, "reasons of "+cell, b.text(`#cells tr[data-reasons-of="`+cell+`"]`), "not following the leader")
		wantContains(t, "voters of "+cell, b.text(`#cells tr[data-cell="`+cell+`"]`), "4 / 5")
	}
	down := `#cells tr[data-cell="payments"] .rep[data-lockd="4"]`
	if !eval[bool](b, `document.querySelector('`+down+`').classList.contains("down")`) {
		t.Errorf("payments' replica on lockd 4 is not marked down")
	}
	wantContains(t, "payments' replica on lockd 4", b.text(down), "4 down")
	wantContains(t, "payments' slow fsync", strings.Join(b.texts(`#cells tr[data-cell="payments"] td.flag`), " | "), "⚠ 214 ms")
	wantContains(t, "payments' reasons", b.text(`#cells tr[data-reasons-of="payments"]`), reasonFsyncSlow.Message)
	checkDegradedOthers(t, b)
}

// checkDegradedOthers reads the move, the proxy and the lockd down.
func checkDegradedOthers(t *testing.T, b *browser) {
	t.Helper()
	wantContains(t, "move of /orders", b.text(`#moves tr[data-prefix="/orders"]`), "payments → demo", api.MigrationSealing, "120 of 400 nodes staged", "1 min")
	if v := b.text(`#moves tr[data-prefix="/orders"] [role=progressbar]`); v != "" {
		t.Errorf("the progress bar holds text %q", v)
	}
	if pct := eval[string](b, `document.querySelector('#moves [role=progressbar]').getAttribute("aria-valuenow")`); pct != "30" {
		t.Errorf("the move's progress bar is at %s%%, want 30", pct)
	}
	wantContains(t, "unreachable proxy", b.text(`#proxies tr[data-proxy="127.0.0.1:7202"]`), "unreachable", proxyError)
	if n := eval[int](b, `document.querySelectorAll("img").length`); n != 0 {
		t.Errorf("the proxy's error was rendered as markup: %d img elements", n)
	}
	wantContains(t, "lockd 4", b.text(`#lockds tr[data-lockd="4"]`), "answered 42 s ago", "connection refused")
	wantContains(t, "lockd 3's fsync", b.text(`#lockds tr[data-lockd="3"] td.flag`), "214 ms")
	wantContains(t, "lockd 6", b.text(`#lockds tr[data-lockd="6"]`), "never answered", "context deadline exceeded")
	wantContains(t, "move of /archive", b.text(`#moves tr[data-prefix="/archive"]`), "demo → payments", "unknown", "4.0 s")
}

// checkStale: the health route fails; the page says its data is stale
// and keeps it.
func checkStale(t *testing.T, b *browser) {
	t.Helper()
	wantContains(t, "stale warning", b.text("#stale"), "Stale", "last refresh failed")
	wantContains(t, "error", b.text("#error"), "unavailable", "failing on purpose")
	wantContains(t, "cells kept", b.text(`#cells tr[data-cell="payments"]`), "degraded")
	wantContains(t, "move kept", b.text("#moves"), "/orders")
}

func anyContains(rows []string, wants ...string) bool {
	for _, r := range rows {
		all := true
		for _, w := range wants {
			all = all && strings.Contains(r, w)
		}
		if all {
			return true
		}
	}
	return false
}
