package docs

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// brokenCases are snippets, each broken one way (and a few sound ones),
// with the part of the failure the runner must report ("" for a sound
// one, which must run). jobArg marks the jobs that must not outlive their
// block.
var brokenCases = []struct{ name, snippet, want string }{
	{"a command that fails", "```sh\nfalse\n```", "`false`: exit status 1"},
	{"an output line not printed", "```sh\necho hello\n# > goodbye\n```",
		`expected output line 1 of 1 not found (in order) in stdout: "goodbye"`},
	{"output lines out of order", "```sh\necho one; echo two\n# > two\n# > one\n```",
		`expected output line 2 of 2 not found (in order) in stdout: "one"`},
	{"another exit status than shown", "```sh\nsh -c 'exit 3'\n# > [exit 2]\n```", "exit status 3, want 2"},
	{"a command that does not end", "```sh\nsleep " + jobArg + "\n```", "no exit within 2s (killed)"},
	{"a program that does not compile", "```go\npackage main\n\nfunc main() { undefined() }\n```", "undefined: undefined"},
	{"a program that fails", "```go\npackage main\n\nimport \"os\"\n\nfunc main() { os.Exit(1) }\n```", "the program: exit status 1"},
	{"a Go fragment", "```go\nx := 1\n```", "a Go fragment, not a complete package main"},
	{"a background command that dies", "<!-- doctest: background sh -c -->\n```sh\nsh -c 'echo up; sleep 0.3; exit 4'\nsleep 1\n```",
		"exited with status 4 before the block ended"},
	{"a failure after a job started", "```sh\nsleep " + jobArg + " &\necho missing\n# > present\n```",
		`not found (in order) in stdout: "present"`},
	{"an unknown marker", "<!-- doctest: skipp typo -->\n```sh\ntrue\n```", `unknown doctest marker "skipp"`},
	{"sound: variables carry, a shown exit", "```sh\nX=1\nexport Y=2\necho \"$X $Y\"\n# > 1 2\nsh -c 'exit 3'\n# > [exit 3]\n```", ""},
	{"sound: addresses moved, wildcards", "```sh\nprintf '%s\\n' 127.0.0.1:7001 ok\n# > 127.0.0.1:7001\n# > o...\n```", ""},
	{"sound: jobs stopped at the end", "<!-- doctest: background sh -c -->\n```sh\nsh -c 'echo started; exec sleep " + jobArg + "'\n# > started\nsleep " + jobArg + " &\necho after\n# > after\n```", ""},
	{"sound: a program", "```go\npackage main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"127.0.0.1:7001\") }\n```", ""},
}

// jobArg is the argument of the sleeps the blocks start: no other process
// runs `sleep 30.0125`.
const jobArg = "30.0125"

// TestRunnerReportsBrokenSnippets: the check can fail. Each broken
// snippet is reported failed with its reason; the sound ones run; no job
// outlives its block. No cluster: the snippets are plain shell and Go.
func TestRunnerReportsBrokenSnippets(t *testing.T) {
	var doc []string
	for _, c := range brokenCases {
		doc = append(doc, c.snippet)
	}
	blocks, errs := Extract("broken.md", strings.Join(doc, "\n\n")+"\n")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(blocks) != len(brokenCases) {
		t.Fatalf("%d blocks, want %d", len(blocks), len(brokenCases))
	}
	env := &Env{Name: "no cluster", Dir: t.TempDir(), Vars: append(baseEnv(), "PATH="+os.Getenv("PATH")), Ports: map[int]int{7001: 17001}}
	r := &Runner{Root: moduleRoot(t), Plain: env, Tmp: t.TempDir(), Timeout: 2 * time.Second}
	ctx := context.Background()
	r.Prebuild(ctx, blocks)
	for i, c := range brokenCases {
		res := r.Run(ctx, &blocks[i])
		t.Logf("%s: %s", c.name, res)
		switch {
		case c.want == "" && res.Status != Ran:
			t.Errorf("%s (%s): %s: %s", c.name, blocks[i].Where(), res.Status, res.Detail)
		case c.want != "" && res.Status != Failed:
			t.Errorf("%s (%s): %s, want a failure saying %q", c.name, blocks[i].Where(), res.Status, c.want)
		case c.want != "" && !strings.Contains(res.Detail, c.want):
			t.Errorf("%s (%s) failed, but not saying %q:\n%s", c.name, blocks[i].Where(), c.want, res.Detail)
		}
	}
	if n := jobsLeft(); n > 0 {
		t.Errorf("%d `sleep %s` outlived their blocks", n, jobArg)
	}
}

// jobsLeft counts the processes `sleep jobArg` still running.
func jobsLeft() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || string(cmdline) != "sleep\x00"+jobArg+"\x00" {
			continue
		}
		pid, _ := strconv.Atoi(e.Name())
		if state, _, ok := procStat(pid); ok && state != "Z" {
			n++
		}
	}
	return n
}

// TestMissingTool: a block using an optional tool that is not installed
// is skipped, naming it; required (LOCKD_REQUIRE_DOCTOOLS=1), it fails.
func TestMissingTool(t *testing.T) {
	const tool = "doctest-no-such-tool"
	optionalTools[tool] = "apt-get install it"
	defer delete(optionalTools, tool)
	blocks, _ := Extract("x.md", "```sh\n"+tool+" get foo\n```\n")
	env := &Env{Name: "no cluster", Dir: t.TempDir(), Vars: baseEnv()}
	for _, require := range []bool{false, true} {
		r := &Runner{Plain: env, Tmp: t.TempDir(), RequireTools: require}
		res := r.Run(context.Background(), &blocks[0])
		want := Skipped
		if require {
			want = Failed
		}
		if res.Status != want || !strings.Contains(res.Detail, tool+" is not installed") {
			t.Errorf("require=%v: %s", require, res)
		}
	}
}
