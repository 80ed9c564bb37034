package docs

import (
	"fmt"
	"slices"
	"strings"
)

// Markers are a block's <!-- doctest: ... --> comments.
type Markers struct {
	Marked     bool     // any marker at all
	Skip       string   // skip REASON: not run, for this reason
	Auth       bool     // auth: on the cluster that requires tokens
	Background []string // background PATTERN, ...: commands that keep running
	Files      []string // files NAME ...: the user's files, from testdata/files
}

// parseMarkers reads marker bodies ("skip reason", "auth", ...).
func parseMarkers(bodies []string) (Markers, []string) {
	var (
		m     Markers
		probs []string
	)
	for _, body := range bodies {
		m.Marked = true
		key, args, _ := strings.Cut(body, " ")
		args = strings.TrimSpace(args)
		switch key {
		case "skip":
			if args == "" {
				probs = append(probs, "skip without a reason")
			}
			m.Skip = args
		case "auth":
			m.Auth = true
		case "background":
			for _, p := range strings.Split(args, ",") {
				if p = strings.TrimSpace(p); p != "" {
					m.Background = append(m.Background, p)
				}
			}
			if len(m.Background) == 0 {
				probs = append(probs, "background names no command")
			}
		case "files":
			m.Files = append(m.Files, strings.Fields(args)...)
			if len(m.Files) == 0 {
				probs = append(probs, "files names no file")
			}
		default:
			probs = append(probs, fmt.Sprintf("unknown doctest marker %q (skip, auth, background, files)", key))
		}
	}
	return m, probs
}

// markBackground flags the commands a background marker names; a pattern
// naming none is a problem.
func markBackground(b *Block) []string {
	var probs []string
	for _, p := range b.Background {
		n := 0
		for i := range b.Commands {
			if strings.Contains(b.Commands[i].Text, p) {
				b.Commands[i].Background = true
				n++
			}
		}
		if n == 0 {
			probs = append(probs, fmt.Sprintf("background %q names no command of the block", p))
		}
	}
	return probs
}

// defaultAddressed are the commands that would reach a dev cluster's
// default address by themselves, where the test cannot move them to its
// own cluster: etcdctl without --endpoints (its default is
// 127.0.0.1:2379, and it refuses ETCDCTL_ENDPOINTS beside the flag).
func defaultAddressed(cmds []Command) []string {
	var probs []string
	for _, c := range cmds {
		if slices.Contains(strings.Fields(stripComment(c.Text)), "etcdctl") && !strings.Contains(c.Text, "--endpoints") {
			probs = append(probs, fmt.Sprintf("line %d: etcdctl without --endpoints (write --endpoints 127.0.0.1:2379: the test moves it to its cluster)", c.Line))
		}
	}
	return probs
}
