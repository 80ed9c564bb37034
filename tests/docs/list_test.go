package docs

import (
	"strings"
	"testing"
)

// TestSnippetList lists every fenced block of README.md and docs/*.md as
// TestDocs will take it, without a cluster, and fails on a shell or Go
// block that can neither run nor says why it does not (a Go fragment, a
// bad marker, an expected line without a command, a file no testdata has).
func TestSnippetList(t *testing.T) {
	blocks, errs := Load(moduleRoot(t))
	for _, err := range errs {
		t.Error(err)
	}
	files := absPath(t, filesDir)
	var list []string
	counts := map[Status]int{}
	for i := range blocks {
		res := Plan(&blocks[i], files)
		counts[res.Status]++
		list = append(list, res.String())
		if res.Status == Failed {
			t.Errorf("%s", res.Detail)
		}
	}
	t.Logf("snippets of README.md and docs/*.md (%d run, %d skipped, %d not shell or Go):\n%s",
		counts[Listed], counts[Skipped], counts[NotRun], strings.Join(list, "\n"))
	if counts[Listed] == 0 {
		t.Error("no block to run: the extractor found none")
	}
}
