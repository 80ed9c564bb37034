package backup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDirPutListFetch(t *testing.T) {
	ctx := context.Background()
	d := Dir{Root: t.TempDir()}
	snap := t.TempDir()
	for name, body := range map[string]string{"snapshot-000000000000002A.gbsnap": "state", "snapshot.metadata": "meta"} {
		if err := os.WriteFile(filepath.Join(snap, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := d.List(ctx, "demo"); err != nil || len(got) != 0 {
		t.Fatalf("empty store lists %v, %v", got, err)
	}
	for _, idx := range []uint64{42, 7, 1000} {
		if _, err := d.Put(ctx, "demo", idx, snap); err != nil {
			t.Fatal(err)
		}
	}
	// A second put at an index keeps the first (the same state).
	if _, err := d.Put(ctx, "demo", 42, snap); err != nil {
		t.Fatal(err)
	}
	// A partial copy left by a crash is not a backup.
	if err := os.MkdirAll(filepath.Join(d.Root, "demo", ".partial-x"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := d.List(ctx, "demo")
	if err != nil || !slices.Equal(got, []uint64{7, 42, 1000}) {
		t.Fatalf("List = %v, %v; want [7 42 1000] (sorted by index, not by name)", got, err)
	}
	dir, err := d.Fetch(ctx, "demo", 42, "")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "snapshot.metadata")); err != nil || string(b) != "meta" {
		t.Fatalf("fetched metadata %q, %v", b, err)
	}
	if _, err := d.Fetch(ctx, "demo", 43, ""); !errors.Is(err, ErrNoBackup) {
		t.Fatalf("fetch of a missing backup: %v, want ErrNoBackup", err)
	}
	if got, _ := d.List(ctx, "payments"); len(got) != 0 {
		t.Fatalf("another cell lists %v", got)
	}
}
