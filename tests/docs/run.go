package docs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Bounds of the runner: every wait is one of these.
const (
	// CommandTimeout bounds one shell command or one Go program's run.
	CommandTimeout = 60 * time.Second
	// GoBuildTimeout bounds the build of one Go block.
	GoBuildTimeout = 3 * time.Minute
	// BackgroundExpectWait bounds the wait for a background command's
	// expected lines.
	BackgroundExpectWait = 30 * time.Second
	// BackgroundSettle is how long a background command without expected
	// lines gets to print its first line before the block goes on.
	BackgroundSettle = time.Second
	// BackgroundStop bounds a background command's exit after SIGTERM
	// (then SIGKILL).
	BackgroundStop = 10 * time.Second
	// waitDelay bounds Wait after a command's context ends (pipes held by
	// a grandchild).
	waitDelay = 5 * time.Second
	// pollEvery is the step of every polling wait.
	pollEvery = 50 * time.Millisecond
)

// Env is where blocks run: a working directory (bin/ holding the
// binaries), the environment of their commands, and the rewrite of the
// dev cluster's default ports to the ports of the cluster they run on.
type Env struct {
	Name  string // "dev", "dev --auth": what the list says
	Dir   string
	Vars  []string
	Ports map[int]int
}

// optionalTools are the tools a block may use that are not everywhere:
// a block using a missing one is skipped, naming it, unless the Runner
// requires them.
var optionalTools = map[string]string{
	"etcdctl": "apt-get install etcd-client",
}

// RequireToolsEnv set to 1 makes a missing optional tool a failure
// (.ci/run sets it).
const RequireToolsEnv = "LOCKD_REQUIRE_DOCTOOLS"

// Runner runs blocks.
type Runner struct {
	Root         string // the repository root: Go blocks are built in its module
	Plain, Auth  *Env   // the dev cluster's; the --auth cluster's (nil: none)
	FilesDir     string // the user's files a files marker names
	Tmp          string // scratch space (commands' outputs, Go builds)
	RequireTools bool
	// Timeout bounds each command and program (0: CommandTimeout).
	Timeout time.Duration
	builds  map[*Block]chan built // Prebuild's
}

// timeout is the bound of one command or program.
func (r *Runner) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return CommandTimeout
}

// envFor is the Env a block runs in (nil: none for it).
func (r *Runner) envFor(b *Block) *Env {
	if b.Auth {
		return r.Auth
	}
	return r.Plain
}

// Plan is what Run will do with a block, known without running it: not
// run, skipped, failed (malformed), or Listed (it runs).
func Plan(b *Block, filesDir string) Result {
	res := Result{Block: b, Status: Listed}
	switch {
	case len(b.Problems) > 0:
		res.Status, res.Detail = Failed, b.Where()+": "+strings.Join(b.Problems, "; ")
	case b.Kind == Other:
		res.Status, res.Detail = NotRun, "tag "+tagName(b.Lang)+": not a shell or Go block"
	case b.Skip != "":
		res.Status, res.Detail = Skipped, b.Skip
	default:
		for _, f := range b.Files {
			if _, err := os.Stat(filepath.Join(filesDir, f)); err != nil {
				res.Status, res.Detail = Failed, fmt.Sprintf("%s: files %s: not in testdata/files", b.Where(), f)
			}
		}
	}
	return res
}

// Run runs one block and says what came of it.
func (r *Runner) Run(ctx context.Context, b *Block) Result {
	start := time.Now()
	res := Plan(b, r.FilesDir)
	if res.Status != Listed {
		return res
	}
	res.Status = Ran
	env := r.envFor(b)
	if env == nil {
		res.Status, res.Detail = Failed, b.Where()+": no cluster to run on"
		return res
	}
	res.Env = env.Name
	if tool, how := r.missingTool(b); tool != "" {
		res.Status, res.Detail = Skipped, tool+" is not installed ("+how+")"
		if r.RequireTools {
			res.Status, res.Detail = Failed, b.Where()+": "+res.Detail+" and "+RequireToolsEnv+"=1"
		}
		return res
	}
	if err := r.runIn(ctx, env, b); err != nil {
		res.Status, res.Detail = Failed, err.Error()
	}
	res.Took = time.Since(start)
	return res
}

func tagName(lang string) string {
	if lang == "" {
		return "(none)"
	}
	return lang
}

// runIn runs a runnable block in env.
func (r *Runner) runIn(ctx context.Context, env *Env, b *Block) error {
	if err := placeFiles(r.FilesDir, env.Dir, b.Files); err != nil {
		return err
	}
	if b.Kind == Go {
		return r.runGo(ctx, env, b)
	}
	scratch, err := os.MkdirTemp(r.Tmp, "block-")
	if err != nil {
		return err
	}
	return runShell(ctx, env, b, scratch, r.timeout())
}

// missingTool names an optional tool the block uses that is not on PATH.
func (r *Runner) missingTool(b *Block) (tool, how string) {
	for _, c := range b.Commands {
		for _, w := range strings.Fields(c.Text) {
			if how, ok := optionalTools[w]; ok {
				if _, err := exec.LookPath(w); err != nil {
					return w, how
				}
			}
		}
	}
	return "", ""
}

// commandError describes a command that failed: where, what, and what it
// printed.
func commandError(b *Block, c Command, text, why, stdout, stderr string) error {
	return fmt.Errorf("%s:%d: `%s`: %s\n--- stdout:\n%s--- stderr:\n%s", b.File, c.Line, oneLine(text), why, tail(stdout), tail(stderr))
}

// oneLine shows a command on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// tailLines bounds the output a failure shows.
const tailLines = 40

// tail is the last tailLines lines of s, ending in a newline.
func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > tailLines {
		lines = append([]string{fmt.Sprintf("[%d lines before]", len(lines)-tailLines)}, lines[len(lines)-tailLines:]...)
	}
	return strings.Join(lines, "\n") + "\n"
}
