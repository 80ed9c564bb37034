package docs

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// expectMark starts an expected output line in a shell block.
const expectMark = "# >"

// parseTimeout bounds one `bash -n` (is this text a complete command?).
const parseTimeout = 10 * time.Second

// shellCommands splits an sh or bash block into commands: a command is a
// line, with the lines after it while it is incomplete ("\" at the end,
// an open if, quote or pipe: what `bash -n` refuses); "# > " lines are
// the expected output of the command before them; other comments and
// blank lines are skipped.
func shellCommands(body []string, first int) ([]Command, []string) {
	var (
		cmds  []Command
		probs []string
	)
	for i := 0; i < len(body); i++ {
		t := strings.TrimSpace(body[i])
		switch {
		case t == "":
		case strings.HasPrefix(t, expectMark):
			if len(cmds) == 0 {
				probs = append(probs, fmt.Sprintf("line %d: expected output before any command", first+i))
				continue
			}
			c := &cmds[len(cmds)-1]
			c.Expect = append(c.Expect, strings.TrimSpace(strings.TrimPrefix(t, expectMark)))
		case strings.HasPrefix(t, "#"):
		default:
			c := Command{Line: first + i, Text: body[i]}
			for (continued(body[i]) || !parses(c.Text)) && i+1 < len(body) {
				i++
				c.Text += "\n" + body[i]
			}
			if !parses(c.Text) {
				probs = append(probs, fmt.Sprintf("line %d: not a complete shell command by the end of the block (bash -n)", c.Line))
			}
			c.Amp = endsWithAmp(c.Text)
			cmds = append(cmds, c)
		}
	}
	return cmds, probs
}

// continued reports whether a line ends in a "\" continuation.
func continued(line string) bool {
	return strings.HasSuffix(strings.TrimRight(line, " \t"), "\\")
}

// compound are the words that open a command spanning lines.
var compound = map[string]bool{"if": true, "for": true, "while": true, "until": true, "case": true, "select": true, "function": true}

// plainLine reports whether a line is surely one complete command: no
// quote, bracket, here-document or compound command to close, and no
// operator at its end that needs more. Only other lines cost a bash -n.
func plainLine(line string) bool {
	t := strings.TrimSpace(stripLine(line))
	if f := strings.Fields(t); len(f) > 0 && compound[f[0]] {
		return false
	}
	for _, end := range []string{"|", "&&", "||", "\\"} {
		if strings.HasSuffix(t, end) {
			return false
		}
	}
	return !strings.ContainsAny(t, "'\"`(){}") && !strings.Contains(t, "<<")
}

// parses reports whether bash accepts text as complete commands.
func parses(text string) bool {
	if !strings.Contains(text, "\n") && plainLine(text) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), parseTimeout)
	defer cancel()
	return exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-n", "-c", text).Run() == nil
}

// consoleCommands splits a console block: a line "$ CMD" is a command,
// the non-blank lines after it its expected output.
func consoleCommands(body []string, first int) []Command {
	var cmds []Command
	for i, l := range body {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "$ "):
			text := strings.TrimPrefix(t, "$ ")
			cmds = append(cmds, Command{Line: first + i, Text: text, Amp: endsWithAmp(text)})
		case t != "" && len(cmds) > 0:
			c := &cmds[len(cmds)-1]
			c.Expect = append(c.Expect, t)
		}
	}
	return cmds
}

// stripComment removes a shell comment from each line of text: a "#"
// starting a word outside quotes, to the end of its line.
func stripComment(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = stripLine(l)
	}
	return strings.Join(lines, "\n")
}

func stripLine(l string) string {
	var quote byte
	escaped := false
	for j := 0; j < len(l); j++ {
		c := l[j]
		switch {
		case escaped:
			escaped = false
		case c == '\\' && quote != '\'':
			escaped = true
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (j == 0 || l[j-1] == ' ' || l[j-1] == '\t'):
			return strings.TrimRight(l[:j], " \t")
		}
	}
	return strings.TrimRight(l, " \t")
}

// endsWithAmp reports whether a command runs in the background by its
// own "&" (not "&&").
func endsWithAmp(text string) bool {
	t := strings.TrimSpace(stripComment(text))
	return strings.HasSuffix(t, "&") && !strings.HasSuffix(t, "&&")
}

var exitRe = regexp.MustCompile(`^\[exit (\d+)\]$`)

// splitExit takes an expected "[exit N]" line out of expect: the command's
// expected status (0 without one).
func splitExit(expect []string) (status int, rest []string) {
	for _, e := range expect {
		if m := exitRe.FindStringSubmatch(strings.TrimSpace(e)); m != nil {
			status, _ = strconv.Atoi(m[1])
			continue
		}
		rest = append(rest, e)
	}
	return status, rest
}
