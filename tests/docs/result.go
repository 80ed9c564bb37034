package docs

import (
	"fmt"
	"strings"
	"time"
)

// Status is what came of a block.
type Status int

const (
	// Ran: every command or the program ran and printed what it shows.
	Ran Status = iota
	// Skipped: a skip marker, or an optional tool missing.
	Skipped
	// Failed: a command or program failed, or the block is malformed.
	Failed
	// NotRun: neither shell nor Go (json, text, untagged).
	NotRun
	// Listed: extracted and runnable, not run (TestSnippetList).
	Listed
)

func (s Status) String() string {
	return [...]string{"ran", "skipped", "FAILED", "not run", "runs"}[s]
}

// Result is one block's outcome.
type Result struct {
	Block  *Block
	Status Status
	Env    string // the cluster it ran on
	Detail string // why skipped or not run, or the failure
	Took   time.Duration
}

// String is the block's line in the list: where, kind, outcome, and its
// first command (or why not).
func (r Result) String() string {
	b := r.Block
	s := fmt.Sprintf("%-18s %-6s %-8s", b.Where(), b.Kind, r.Status)
	switch r.Status {
	case Failed:
		first, _, _ := strings.Cut(r.Detail, "\n")
		return s + " " + first
	case Skipped, NotRun:
		return s + " " + r.Detail
	}
	s += " " + Summary(b)
	if r.Env != "" {
		s += " [" + r.Env + "]"
	}
	if r.Took > 0 {
		s += fmt.Sprintf(" %.1fs", r.Took.Seconds())
	}
	return s
}

// Summary is a runnable block's first command (and how many more), or a
// Go program's size.
func Summary(b *Block) string {
	if b.Kind == Go {
		return fmt.Sprintf("a program of %d lines", len(b.Body))
	}
	if len(b.Commands) == 0 {
		return ""
	}
	s := "`" + oneLine(stripComment(b.Commands[0].Text)) + "`"
	if n := len(b.Commands) - 1; n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	var marks []string
	for _, c := range b.Commands {
		if len(c.Expect) > 0 {
			marks = append(marks, fmt.Sprintf("%d output lines checked", countExpect(b)))
			break
		}
	}
	if len(b.Files) > 0 {
		marks = append(marks, "files "+strings.Join(b.Files, " "))
	}
	var bg []string
	for _, c := range b.Commands {
		if c.Background || c.Amp {
			bg = append(bg, short(oneLine(stripComment(c.Text)), shortCommand))
		}
	}
	if len(bg) > 0 {
		marks = append(marks, "in the background: "+strings.Join(bg, ", "))
	}
	if len(marks) > 0 {
		s += " (" + strings.Join(marks, "; ") + ")"
	}
	return s
}

func countExpect(b *Block) int {
	n := 0
	for _, c := range b.Commands {
		n += len(c.Expect)
	}
	return n
}

// shortCommand bounds a command named in a list line.
const shortCommand = 28

// short is s cut to n bytes, "…" marking the cut.
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
