package audit

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNeedsRotation(t *testing.T) {
	for _, tc := range []struct {
		size, add, max int64
		want           bool
	}{
		{0, 10, 5, false}, // an empty file takes even an oversize record
		{4, 1, 5, false},
		{4, 2, 5, true},
		{5, 1, 5, true},
	} {
		if got := needsRotation(tc.size, tc.add, tc.max); got != tc.want {
			t.Errorf("needsRotation(%d, %d, %d) = %v", tc.size, tc.add, tc.max, got)
		}
	}
}

func TestCheckOptions(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		okay bool
	}{
		{Options{Path: "x"}, true},
		{Options{Path: "x", MaxBytes: 1 << 20, Keep: MaxKeep}, true},
		{Options{Path: "x", Keep: MaxKeep + 1}, false},
		{Options{Path: "x", Keep: -1}, false},
		{Options{Path: "x", MaxBytes: -1}, false},
		{Options{Path: "x", MaxBytes: MaxMaxBytes + 1}, false},
	} {
		if err := CheckOptions(tc.o); (err == nil) != tc.okay {
			t.Errorf("CheckOptions(%+v) = %v", tc.o, err)
		}
	}
}

// TestRotationKeepsKFiles: many records through a small file leave PATH
// and PATH.1 … PATH.keep, each within the size, the newest record last.
func TestRotationKeepsKFiles(t *testing.T) {
	for _, keep := range []int{1, 3} {
		t.Run(fmt.Sprint("keep ", keep), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "audit.log")
			const maxBytes = 600
			l, err := New(slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Path: path, MaxBytes: maxBytes, Keep: keep})
			if err != nil {
				t.Fatal(err)
			}
			const records = 100
			for i := range records {
				l.Record(Record{Time: t0, Action: ActCellCreate, Result: ResultOK, Target: Target{Cell: fmt.Sprintf("cell-%03d", i)}})
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != keep+1 {
				t.Fatalf("%d files, want %d", len(ents), keep+1)
			}
			for _, e := range ents {
				st, _ := os.Stat(filepath.Join(dir, e.Name()))
				if st.Size() > maxBytes {
					t.Errorf("%s is %d bytes, over %d", e.Name(), st.Size(), maxBytes)
				}
			}
			b, _ := os.ReadFile(path)
			if !strings.HasSuffix(strings.TrimSpace(string(b)), `"cell":"cell-099"}}`) {
				t.Fatalf("the newest record is not last in %s:\n%s", path, b)
			}
		})
	}
}
