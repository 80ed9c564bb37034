package statuspage

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lockservice/lockd/api"
)

// waitDegraded waits until the page shows each fault: the killed lockd
// unreachable and its replicas down, the slow disk, the move in flight
// with its progress.
func (e *env) waitDegraded(b *browser, down, slow int) {
	e.t.Helper()
	problem := func(code, mention string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('#problems tr[data-code="%s"]')].some((r) => r.innerText.includes(%q))`, code, mention)
	}
	b.waitFor("lockd "+strconv.Itoa(down)+" unreachable", problem(api.ReasonLockdDown, fmt.Sprintf("lockd %d", down)), degradeWait)
	b.waitFor("its replicas down", problem(api.ReasonReplicaDown, fmt.Sprintf("lockd %d", down)), degradeWait)
	b.waitFor("lockd "+strconv.Itoa(slow)+"'s slow disk", problem(api.ReasonFsyncSlow, fmt.Sprintf("lockd %d", slow)), degradeWait)
	move := `document.querySelector('#moves tr[data-prefix="` + movePrefix + `"]')`
	b.waitFor("the move's progress", move+` && `+move+`.querySelector("[role=progressbar]")`, degradeWait)
	b.waitFor("the move's age", `!`+move+`.innerText.includes("just seen")`, degradeWait)
}

// checkDegraded reads the degraded cluster's page.
func (e *env) checkDegraded(b *browser, down, slow int) {
	t := e.t
	t.Helper()
	if lvl := b.text("#level"); !strings.Contains(lvl, "degraded") && !strings.Contains(lvl, "critical") {
		t.Errorf("cluster level %q, want degraded or critical", lvl)
	}
	if b.visible("#allhealthy") {
		t.Errorf("\"All healthy\" shown for a degraded cluster")
	}
	problems := b.texts("#problems tbody tr")
	for _, cell := range []string{"demo", "payments"} {
		if !anyContains(problems, "cell "+cell, api.ReasonReplicaDown, fmt.Sprintf("lockd %d", down)) {
			t.Errorf("no problem says cell %s's replica on lockd %d is down:\n%s", cell, down, strings.Join(problems, "\n"))
		}
		row := `#cells tr[data-cell="` + cell + `"]`
		if badge := b.text(row + " .badge"); strings.Contains(badge, "ok") {
			t.Errorf("cell %s's badge says %q with a replica down", cell, badge)
		}
		wantContains(t, "voters of "+cell, b.text(row), "4 / 5")
		chip := fmt.Sprintf(`%s .rep[data-lockd="%d"]`, row, down)
		if !eval[bool](b, `(document.querySelector('`+chip+`') || {classList: new Set()}).classList.contains("down")`) {
			t.Errorf("cell %s: the replica on lockd %d is not marked down: %q", cell, down, b.text(row))
		}
		wantContains(t, fmt.Sprintf("cell %s's replica on lockd %d", cell, down), b.text(chip), "down")
		wantContains(t, "cell "+cell+"'s flagged figures", strings.Join(b.texts(row+" td.flag"), " | "), "⚠")
	}
	if !anyContains(problems, api.ReasonFsyncSlow, fmt.Sprintf("lockd %d", slow)) {
		t.Errorf("no problem names lockd %d's slow fsync:\n%s", slow, strings.Join(problems, "\n"))
	}
	wantContains(t, "the slow lockd", b.text(fmt.Sprintf(`#lockds tr[data-lockd="%d"] td.flag`, slow)), "ms")
	wantContains(t, "the killed lockd", b.text(fmt.Sprintf(`#lockds tr[data-lockd="%d"]`, down)), "answered", "ago", "degraded")
	e.checkMove(b)
}

// checkMove reads the move's row: its cells, phase and a progress part
// way.
func (e *env) checkMove(b *browser) {
	t := e.t
	t.Helper()
	row := `#moves tr[data-prefix="` + movePrefix + `"]`
	wantContains(t, "the move", b.text(row), "demo → payments", api.MigrationSealing, " of ", "nodes staged")
	pct, err := strconv.Atoi(eval[string](b, `document.querySelector('`+row+` [role=progressbar]').getAttribute("aria-valuenow")`))
	if err != nil || pct <= 0 || pct >= 100 {
		t.Errorf("the move's progress bar is at %d%% (%v), want part way: %q", pct, err, b.text(row))
	}
}
