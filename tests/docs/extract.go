package docs

import (
	"fmt"
	"go/format"
	"regexp"
	"strings"
)

// Kind is what a fenced block is run as.
type Kind int

const (
	// Other blocks (json, text, untagged) are not run.
	Other Kind = iota
	// Shell blocks (sh, bash, console) run command by command.
	Shell
	// Go blocks are built and run as a program.
	Go
)

func (k Kind) String() string {
	switch k {
	case Shell:
		return "shell"
	case Go:
		return "go"
	}
	return "other"
}

// kindOf maps a fence's tag to its kind.
func kindOf(lang string) Kind {
	switch lang {
	case "sh", "bash", "console":
		return Shell
	case "go":
		return Go
	}
	return Other
}

// Block is one fenced block of a Markdown file.
type Block struct {
	File     string   // the file, relative to the repository root
	Line     int      // the opening fence's line, from 1
	Lang     string   // the fence's tag ("" untagged)
	Kind     Kind     // what it runs as
	Body     []string // the lines between the fences, indentation removed
	BodyLine int      // the line of Body[0]
	Markers
	Commands []Command // a shell block's commands
	// Problems say why the block cannot run as marked: a bad marker, an
	// expected line with no command, a Go fragment. TestSnippetList and
	// TestDocs fail on any.
	Problems []string
}

// Command is one command of a shell block.
type Command struct {
	Line       int      // its first line in the file
	Text       string   // the command, continuation lines joined by "\\\n"
	Expect     []string // its "# > " lines, marker removed
	Background bool     // a background marker names it: the runner backgrounds it
	Amp        bool     // it ends with "&": it backgrounds itself
}

// Where names the block as file:line.
func (b *Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

var (
	fenceRe  = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([^\\s`]*)")
	markerRe = regexp.MustCompile(`^\s*<!--\s*doctest:\s*(.*?)\s*-->\s*$`)
)

// Extract returns the fenced blocks of one Markdown file, with their
// markers and, for shell blocks, their commands. The errors are markers
// that belong to no block (not directly before a fence).
func Extract(file, text string) ([]Block, []error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	var (
		blocks  []Block
		errs    []error
		pending []string // marker bodies on the lines just before
		pendAt  int
	)
	for i := 0; i < len(lines); i++ {
		if m := markerRe.FindStringSubmatch(lines[i]); m != nil {
			if len(pending) == 0 {
				pendAt = i + 1
			}
			pending = append(pending, m[1])
			continue
		}
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			if len(pending) > 0 {
				errs = append(errs, fmt.Errorf("%s:%d: doctest marker not directly before a fence", file, pendAt))
				pending = nil
			}
			continue
		}
		b, end := fencedBlock(file, lines, i, m)
		b.Markers, b.Problems = parseMarkers(pending)
		pending = nil
		finish(&b)
		blocks = append(blocks, b)
		i = end
	}
	if len(pending) > 0 {
		errs = append(errs, fmt.Errorf("%s:%d: doctest marker not directly before a fence", file, pendAt))
	}
	return blocks, errs
}

// fencedBlock reads the block whose opening fence is lines[i] (m its
// match) and returns it with the index of its closing fence.
func fencedBlock(file string, lines []string, i int, m []string) (Block, int) {
	indent, fence, lang := m[1], m[2], m[3]
	b := Block{File: file, Line: i + 1, Lang: lang, Kind: kindOf(lang), BodyLine: i + 2}
	j := i + 1
	for ; j < len(lines); j++ {
		t := strings.TrimSpace(lines[j])
		if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
			break
		}
		b.Body = append(b.Body, strings.TrimPrefix(lines[j], indent))
	}
	if j == len(lines) {
		b.Problems = append(b.Problems, "fence never closed")
	}
	return b, j
}

// finish parses a block's commands and checks what its kind needs.
func finish(b *Block) {
	switch b.Kind {
	case Other:
		if b.Marked {
			b.Problems = append(b.Problems, "a doctest marker on a block that is not shell or Go")
		}
	case Shell:
		var probs []string
		if b.Lang == "console" {
			b.Commands = consoleCommands(b.Body, b.BodyLine)
		} else {
			b.Commands, probs = shellCommands(b.Body, b.BodyLine)
		}
		probs = append(probs, markBackground(b)...)
		probs = append(probs, defaultAddressed(b.Commands)...)
		if len(b.Commands) == 0 {
			probs = append(probs, "a shell block without a command")
		}
		if b.Skip == "" { // a skipped block may be anything
			b.Problems = append(b.Problems, probs...)
		}
	case Go:
		if b.Skip != "" {
			break
		}
		src := strings.Join(b.Body, "\n") + "\n"
		if !isProgram(b.Body) {
			b.Problems = append(b.Problems, "a Go fragment, not a complete package main: make it one, or mark it <!-- doctest: skip REASON -->")
		} else if f, err := format.Source([]byte(src)); err == nil && string(f) != src {
			b.Problems = append(b.Problems, "not formatted as gofmt formats it")
		}
	}
}

// isProgram reports whether Go source lines start (after comments and
// blank lines) with "package main".
func isProgram(body []string) bool {
	for _, l := range body {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "//") {
			continue
		}
		return t == "package main"
	}
	return false
}
