package fsm

// A small runner of transcript files in the style of etcd raft's
// datadriven tests (github.com/cockroachdb/datadriven): each case is a
// command line (`name key=value key ...`), optional input lines, a line
// `----`, then the expected output, ended by a blank line. Lines starting
// with `#` between cases are comments. `go test -run TestTranscripts
// -rewrite` writes the actual output in place of the expected.

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var rewriteFlag = flag.Bool("rewrite", false, "rewrite the expected output of the testdata/*.txt transcripts")

// ddArg is one key=value of a command line (Val "" for a bare key).
type ddArg struct{ Key, Val string }

// ddCase is one command of a transcript file.
type ddCase struct {
	Pos      string // file:line of the command line
	Name     string
	Args     []ddArg
	Input    string
	Expected string
	outStart int // first line of the expected output
	outEnd   int // line after it (the blank line or the end)
}

// Arg returns the value of key and whether the command line has it.
func (c *ddCase) Arg(key string) (string, bool) {
	for _, a := range c.Args {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// parseDD splits a transcript into its cases.
func parseDD(file string, lines []string) ([]ddCase, error) {
	var out []ddCase
	for i := 0; i < len(lines); {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			i++
			continue
		}
		c := ddCase{Pos: fmt.Sprintf("%s:%d", file, i+1)}
		fields := strings.Fields(l)
		c.Name = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.Args = append(c.Args, ddArg{Key: k, Val: v})
		}
		i++
		var input []string
		for ; i < len(lines) && lines[i] != "----"; i++ {
			input = append(input, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s: command %q has no ---- line", c.Pos, c.Name)
		}
		c.Input = strings.Join(input, "\n")
		i++
		c.outStart = i
		for ; i < len(lines) && lines[i] != ""; i++ {
		}
		c.outEnd = i
		c.Expected = strings.Join(lines[c.outStart:c.outEnd], "\n")
		out = append(out, c)
	}
	return out, nil
}

// runDD runs every case of the transcript at path through run, in order,
// and compares (or, with -rewrite, replaces) the expected outputs.
func runDD(t *testing.T, path string, run func(c *ddCase) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	cases, err := parseDD(path, lines)
	if err != nil {
		t.Fatal(err)
	}
	actual := make([]string, len(cases))
	for i := range cases {
		c := &cases[i]
		got := strings.TrimRight(run(c), "\n")
		if strings.Contains(got, "\n\n") || strings.HasPrefix(got, "\n") {
			t.Fatalf("%s: output of %s has a blank line (it would end the case):\n%s", c.Pos, c.Name, got)
		}
		actual[i] = got
		if got != c.Expected && !*rewriteFlag {
			t.Errorf("%s: %s: output differs (-want +got):\n%s", c.Pos, c.Name, lineDiff(c.Expected, got))
		}
	}
	if *rewriteFlag {
		if err := os.WriteFile(path, []byte(rewriteDD(lines, cases, actual)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rewriteDD is the file with every case's expected output replaced.
func rewriteDD(lines []string, cases []ddCase, actual []string) string {
	var b strings.Builder
	next := 0
	for i, c := range cases {
		for _, l := range lines[next:c.outStart] {
			b.WriteString(l + "\n")
		}
		if actual[i] != "" {
			b.WriteString(actual[i] + "\n")
		}
		next = c.outEnd
	}
	for _, l := range lines[next:] {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// lineDiff is a line diff of want and got (longest common subsequence):
// "-" lines only in want, "+" only in got, "  " in both.
func lineDiff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out.WriteString("  " + a[i] + "\n")
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out.WriteString("- " + a[i] + "\n")
			i++
		default:
			out.WriteString("+ " + b[j] + "\n")
			j++
		}
	}
	return out.String()
}
