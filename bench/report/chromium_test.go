package report

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestHTMLInHeadlessChromium opens the report in a real browser and checks
// the rendered page: no console errors, every chart an <svg> with data and
// a drawn line. It needs Chromium (.ci/run installs it and sets
// LOCKD_REQUIRE_CHROMIUM=1, so CI cannot skip it); elsewhere it skips if
// none is installed.
func TestHTMLInHeadlessChromium(t *testing.T) {
	bin := os.Getenv("LOCKBENCH_CHROMIUM")
	if bin == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				bin = p
				break
			}
		}
	}
	if bin == "" {
		if os.Getenv("LOCKD_REQUIRE_CHROMIUM") == "1" {
			t.Fatal("no Chromium found and LOCKD_REQUIRE_CHROMIUM=1")
		}
		t.Skip("no Chromium installed (apt-get install chromium)")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := wideRun().HTML(&b); err != nil {
		t.Fatal(err)
	}
	// The test alone adds a script that measures the laid-out page.
	html := strings.Replace(b.String(), "</body>", layoutProbe+"</body>", 1)
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The flags keep a sandboxed, offline machine's Chromium from
	// reaching out (and failing) at start.
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--enable-logging=stderr", "--v=0", "--window-size=800,600",
		"--dump-dom", "file://"+page)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := stdout.String()
	for _, bad := range []string{"Uncaught", "CONSOLE"} {
		if strings.Contains(stderr.String(), bad) {
			t.Errorf("console error while rendering:\n%s", stderr.String())
		}
	}
	svgs := regexp.MustCompile(`<svg [^>]*data-points="(\d+)"[^>]*>(.*?)</svg>`).FindAllStringSubmatch(dom, -1)
	if len(svgs) != 4 {
		t.Fatalf("rendered page has %d charts, want 4:\n%.2000s", len(svgs), dom)
	}
	for _, m := range svgs {
		if m[1] == "0" || !strings.Contains(m[2], "<polyline") {
			t.Errorf("a chart without data: %.300s", m[0])
		}
	}
	if !strings.Contains(dom, "acquire / c=1 distinct") || !strings.Contains(dom, `id="capacity"`) {
		t.Errorf("the rendered page lacks the results or the capacity plan:\n%.2000s", dom)
	}
	checkLayout(t, dom)
}

// layoutProbe measures the rendered page: tick labels drawn (a box of
// their own), charts with fewer than two ticks on an axis, and how far
// the page is wider than the window (the tables must scroll or wrap in
// their own box, never widen the body).
const layoutProbe = `<script>
(function () {
  var ticks = document.querySelectorAll('svg g.tick text'), drawn = 0, bad = 0;
  ticks.forEach(function (t) { var b = t.getBBox(); if (b.width > 0 && b.height > 0) drawn++; });
  document.querySelectorAll('svg').forEach(function (s) {
    if (s.querySelectorAll('g.tick.x').length < 2 || s.querySelectorAll('g.tick.y').length < 2) bad++;
  });
  var de = document.documentElement;
  document.body.setAttribute('data-layout', 'ticks=' + ticks.length + ' drawn=' + drawn + ' bad=' + bad +
    ' overflow=' + (de.scrollWidth - de.clientWidth));
})();
</script>`

// checkLayout reads what layoutProbe measured.
func checkLayout(t *testing.T, dom string) {
	t.Helper()
	m := regexp.MustCompile(`data-layout="ticks=(\d+) drawn=(\d+) bad=(\d+) overflow=(-?\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the layout probe did not run:\n%.2000s", dom)
	}
	t.Logf("layout: %s", m[0])
	if m[1] == "0" || m[1] != m[2] {
		t.Errorf("%s tick labels, %s of them drawn", m[1], m[2])
	}
	if m[3] != "0" {
		t.Errorf("%s charts with fewer than two ticks on an axis", m[3])
	}
	if m[4] != "0" {
		t.Errorf("the page is %s px wider than the window: a table overflows the body", m[4])
	}
}

// wideRun is sampleRun with a row of many long extras and a capacity
// plan: the table must wrap or scroll within the page.
func wideRun() *Run {
	r := sampleRun()
	for i := 0; i < 12; i++ {
		r.Results[0].Extra[fmt.Sprintf("a_rather_long_figure_name_number_%d_per_s", i)] = float64(i) * 1234.5
	}
	r.Results[1].Case = strings.Repeat("a long case name that goes on ", 8)
	r.Capacity = &CapacityPlan{Target: "the spec's region", Inputs: []string{"writes per cell 6000/s"},
		Reasoning: []string{"cells = 1", "proxies = 27"}, Result: "1 cells, 5 replicas, 27 proxies"}
	return r
}
