package lockd

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A failed backup's export directory is left (dragonboat may still be
// writing into it) and swept by a later backup once exportSweepAge old;
// a recent one is kept.
func TestSweepExportsKeepsRecent(t *testing.T) {
	scratch := t.TempDir()
	now := time.Now()
	for name, age := range map[string]time.Duration{"demo-old": 2 * exportSweepAge, "demo-new": time.Minute} {
		dir := filepath.Join(scratch, name)
		if err := os.MkdirAll(filepath.Join(dir, "snapshot-1.generating"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dir, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	sweepExports(scratch, now, exportSweepAge)
	if _, err := os.Stat(filepath.Join(scratch, "demo-old")); !os.IsNotExist(err) {
		t.Fatalf("an export older than %v was kept: %v", exportSweepAge, err)
	}
	if _, err := os.Stat(filepath.Join(scratch, "demo-new", "snapshot-1.generating")); err != nil {
		t.Fatalf("a recent export, possibly still being written, was swept: %v", err)
	}
}
