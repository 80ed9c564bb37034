package audit

import (
	"os"
	"strings"
	"testing"
)

// TestRotationFailureDoesNotSilenceTheFile: a rotation that fails (here
// PATH.1 is a non-empty directory, which no rename replaces, root or
// not) reports its error; once the cause is gone, later records reach
// the file again. Before the fix the failed rotation left the file
// closed and every later write returned nil: the audit file went silent
// for good after one warning.
func TestRotationFailureDoesNotSilenceTheFile(t *testing.T) {
	path := t.TempDir() + "/audit.jsonl"
	r, err := openRotator(Options{Path: path, MaxBytes: 64, Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	block := rotatedName(path, 1)
	if err := os.MkdirAll(block+"/x", 0o755); err != nil {
		t.Fatal(err)
	}
	rec := []byte(strings.Repeat("a", 40) + "\n")
	if err := r.write(rec); err != nil { // the first fits
		t.Fatal(err)
	}
	if err := r.write(rec); err == nil { // needs a rotation, which fails
		t.Fatal("a failed rotation reported no error")
	}
	if err := os.RemoveAll(block); err != nil {
		t.Fatal(err)
	}
	last := []byte(`{"after":"the fault"}` + "\n")
	if err := r.write(last); err != nil {
		t.Fatalf("write after the fault cleared: %v", err)
	}
	var all string
	for _, p := range []string{path, block} {
		b, _ := os.ReadFile(p)
		all += string(b)
	}
	if !strings.Contains(all, `"after":"the fault"`) {
		t.Fatalf("the record after the fault is in no file: %q", all)
	}
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	if err := r.write(last); err != nil {
		t.Fatalf("write after close: %v", err)
	}
}
