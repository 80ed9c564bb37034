package cluster

import (
	"os"
	"os/exec"
	"testing"
)

// ChromiumPath finds Chromium for a browser test; without one the test
// skips, unless LOCKD_REQUIRE_CHROMIUM=1 (.ci/run installs it and sets
// that), where it fails.
func ChromiumPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("LOCKD_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("no Chromium found and LOCKD_REQUIRE_CHROMIUM=1")
	}
	t.Skip("no Chromium installed (apt-get install chromium)")
	return ""
}
