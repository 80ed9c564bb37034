package report

import (
	"bytes"
	"context"
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
	if err := sampleRun().HTML(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The flags keep a sandboxed, offline machine's Chromium from
	// reaching out (and failing) at start.
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--enable-logging=stderr", "--v=0",
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
	if !strings.Contains(dom, "acquire / c=1 distinct") {
		t.Errorf("the rendered page lacks the results:\n%.2000s", dom)
	}
}
