package docs

import (
	"reflect"
	"strings"
	"testing"
)

// TestExtract: blocks, kinds, markers, commands (continuations, multi-line
// commands, jobs) and expected lines, and what makes a block malformed.
func TestExtract(t *testing.T) {
	cases := []struct {
		name, md string
		want     []Block // only the fields compared below
		errs     int
	}{
		{"tags", "```sh\ntrue\n```\n```bash\ntrue\n```\n```go\npackage main\n```\n```json\n{}\n```\n```\nx\n```\n",
			[]Block{{Line: 1, Kind: Shell}, {Line: 4, Kind: Shell}, {Line: 7, Kind: Go}, {Line: 10, Kind: Other}, {Line: 13, Kind: Other}}, 0},
		{"markers", "<!-- doctest: skip needs root -->\n```sh\nmake chaos\n```\n<!-- doctest: auth -->\n<!-- doctest: files a.sh b.sh -->\n```sh\n./a.sh\n```\n",
			[]Block{{Line: 2, Kind: Shell, Markers: Markers{Marked: true, Skip: "needs root"}},
				{Line: 7, Kind: Shell, Markers: Markers{Marked: true, Auth: true, Files: []string{"a.sh", "b.sh"}}}}, 0},
		{"a marker away from its fence", "<!-- doctest: auth -->\n\n```sh\ntrue\n```\n", []Block{{Line: 3, Kind: Shell}}, 1},
		{"a fragment", "```go\nx := 1\n```\n",
			[]Block{{Line: 1, Kind: Go, Problems: []string{"a Go fragment, not a complete package main: make it one, or mark it <!-- doctest: skip REASON -->"}}}, 0},
		{"not gofmt-formatted", "```go\npackage main\nfunc main() {}\n```\n",
			[]Block{{Line: 1, Kind: Go, Problems: []string{"not formatted as gofmt formats it"}}}, 0},
		{"a skipped fragment", "<!-- doctest: skip a fragment -->\n```go\nx := 1\n```\n",
			[]Block{{Line: 2, Kind: Go, Markers: Markers{Marked: true, Skip: "a fragment"}}}, 0},
		{"skip without reason", "<!-- doctest: skip -->\n```sh\ntrue\n```\n",
			[]Block{{Line: 2, Kind: Shell, Markers: Markers{Marked: true}, Problems: []string{"skip without a reason"}}}, 0},
		{"a marker on json", "<!-- doctest: auth -->\n```json\n{}\n```\n",
			[]Block{{Line: 2, Kind: Other, Markers: Markers{Marked: true, Auth: true}, Problems: []string{"a doctest marker on a block that is not shell or Go"}}}, 0},
		{"etcdctl at its default address", "```sh\netcdctl get foo\netcdctl --endpoints 127.0.0.1:2379 get foo\n```\n",
			[]Block{{Line: 1, Kind: Shell, Problems: []string{"line 2: etcdctl without --endpoints (write --endpoints 127.0.0.1:2379: the test moves it to its cluster)"}}}, 0},
		{"indented fence", "- item\n\n  ```sh\n  echo hi\n  # > hi\n  ```\n", []Block{{Line: 3, Kind: Shell}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, errs := Extract("x.md", c.md)
			if len(errs) != c.errs {
				t.Errorf("errors %v, want %d", errs, c.errs)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d blocks, want %d: %+v", len(got), len(c.want), got)
			}
			for i, w := range c.want {
				g := got[i]
				if g.Line != w.Line || g.Kind != w.Kind || !reflect.DeepEqual(g.Markers, w.Markers) || !reflect.DeepEqual(g.Problems, w.Problems) {
					t.Errorf("block %d: line %d kind %v markers %+v problems %q; want line %d kind %v markers %+v problems %q",
						i, g.Line, g.Kind, g.Markers, g.Problems, w.Line, w.Kind, w.Markers, w.Problems)
				}
			}
		})
	}
}

// TestShellCommands: how a shell block splits into commands.
func TestShellCommands(t *testing.T) {
	cases := []struct {
		name, body string
		want       []Command
		probs      int
	}{
		{"lines, comments, expected output", "a   # comment\n# just a comment\n\nb\n# > out 1\n  # >   out 2\n",
			[]Command{{Line: 10, Text: "a   # comment"}, {Line: 13, Text: "b", Expect: []string{"out 1", "out 2"}}}, 0},
		{"continuation", "lockd serve --id 1 \\\n  --zone a\nc\n",
			[]Command{{Line: 10, Text: "lockd serve --id 1 \\\n  --zone a"}, {Line: 12, Text: "c"}}, 0},
		{"a multi-line if", "if ! x=$(false); then\n  echo no\nfi\n",
			[]Command{{Line: 10, Text: "if ! x=$(false); then\n  echo no\nfi"}}, 0},
		{"a pipe across lines", "printf 'a\\n' |\n  sort\n", []Command{{Line: 10, Text: "printf 'a\\n' |\n  sort"}}, 0},
		{"jobs", "lockctl watch /x & # bg\nkill $! && wait\n",
			[]Command{{Line: 10, Text: "lockctl watch /x & # bg", Amp: true}, {Line: 11, Text: "kill $! && wait"}}, 0},
		{"expected output first", "# > nothing yet\ntrue\n", []Command{{Line: 11, Text: "true"}}, 1},
		{"never complete", "echo 'open\n", []Command{{Line: 10, Text: "echo 'open"}}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, probs := shellCommands(strings.Split(strings.TrimSuffix(c.body, "\n"), "\n"), 10)
			if len(probs) != c.probs {
				t.Errorf("problems %q, want %d", probs, c.probs)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestConsoleCommands: "$ " lines are commands, the lines after them
// their output.
func TestConsoleCommands(t *testing.T) {
	got := consoleCommands([]string{"$ bin/lockctl get /demo/x", "on", "", "$ sleep 1 &"}, 5)
	want := []Command{{Line: 5, Text: "bin/lockctl get /demo/x", Expect: []string{"on"}}, {Line: 8, Text: "sleep 1 &", Amp: true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// TestBackgroundMarker: a background marker flags the commands it names,
// and one naming none is a problem.
func TestBackgroundMarker(t *testing.T) {
	md := "<!-- doctest: background lockctl elect, lockctl watch -->\n```sh\nlockctl elect /e v\nlockctl leader /e\nlockctl watch /x\n```\n" +
		"<!-- doctest: background lockctl nothing -->\n```sh\ntrue\n```\n"
	blocks, _ := Extract("x.md", md)
	var bg []bool
	for _, c := range blocks[0].Commands {
		bg = append(bg, c.Background)
	}
	if !reflect.DeepEqual(bg, []bool{true, false, true}) || len(blocks[0].Problems) != 0 {
		t.Errorf("background %v, problems %q", bg, blocks[0].Problems)
	}
	if len(blocks[1].Problems) != 1 {
		t.Errorf("a pattern naming no command: problems %q", blocks[1].Problems)
	}
}

// TestStripComment: comments end at quotes' ends, not inside them.
func TestStripComment(t *testing.T) {
	for in, want := range map[string]string{
		"a # b":                 "a",
		"a '# not' # yes":       "a '# not'",
		`a "it's # in" # out`:   `a "it's # in"`,
		"a#b":                   "a#b",
		`a \# b`:                `a \# b`,
		"x &   # background":    "x &",
		"one # c\ntwo # d":      "one\ntwo",
		"# only":                "",
		`echo "$(hostname):80"`: `echo "$(hostname):80"`,
	} {
		if got := stripComment(in); got != want {
			t.Errorf("stripComment(%q) = %q, want %q", in, got, want)
		}
	}
}
