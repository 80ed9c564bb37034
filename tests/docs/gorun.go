package docs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/lockservice/lockd/tests/cluster"
)

// snippetPkg is where a Go block is built, relative to the repository
// root: a directory that does not exist, given its main.go by a go build
// overlay, so the program resolves this module's packages (and its
// go.sum) as written and nothing is written into the tree.
const snippetPkg = "tests/docs/testdata/snippets"

var unsafeRe = regexp.MustCompile(`[^A-Za-z0-9]+`)

// built is a Go block's build: the program, or go build's output.
type built struct {
	bin, out string
	err      error
}

// Prebuild builds the Go blocks to run, one after another in the
// background (overlapping the clusters' start); Run waits for a block's
// build. Call it once the Runner's Envs are set.
func (r *Runner) Prebuild(ctx context.Context, blocks []Block) {
	r.builds = map[*Block]chan built{}
	var todo []*Block
	for i := range blocks {
		b := &blocks[i]
		if b.Kind == Go && Plan(b, r.FilesDir).Status == Listed && r.envFor(b) != nil {
			r.builds[b] = make(chan built, 1)
			todo = append(todo, b)
		}
	}
	go func() {
		for _, b := range todo {
			r.builds[b] <- r.build(ctx, b)
		}
	}()
}

// build builds a Go block's program for the cluster it runs on.
func (r *Runner) build(ctx context.Context, b *Block) built {
	scratch, err := os.MkdirTemp(r.Tmp, "go-")
	if err != nil {
		return built{err: err}
	}
	src := Rewrite(strings.Join(b.Body, "\n"), r.envFor(b).Ports)
	bin, out, err := r.buildGo(ctx, b, src, scratch)
	return built{bin: bin, out: out, err: err}
}

// runGo runs a Go block's program (built by Prebuild, or now) in env,
// within the Runner's timeout; it must exit 0.
func (r *Runner) runGo(ctx context.Context, env *Env, b *Block) error {
	var bld built
	if ch, ok := r.builds[b]; ok {
		bld = <-ch
	} else {
		bld = r.build(ctx, b)
	}
	if bld.err != nil {
		return fmt.Errorf("%s: go build: %v\n%s", b.Where(), bld.err, tail(bld.out))
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, bld.bin)
	cmd.Dir, cmd.Env, cmd.WaitDelay = env.Dir, slices.Clone(env.Vars), waitDelay
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cluster.StartProcess(cmd) // dies with the test binary
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no exit within %v (killed): %v", r.timeout(), err)
		}
		return fmt.Errorf("%s: the program: %v\n--- stdout:\n%s--- stderr:\n%s", b.Where(), err, tail(stdout.String()), tail(stderr.String()))
	}
	return nil
}

// buildGo writes src to scratch and builds it, through an overlay, as the
// package snippetPkg/<block> of the module at r.Root.
func (r *Runner) buildGo(ctx context.Context, b *Block, src, scratch string) (bin, out string, err error) {
	mainGo := filepath.Join(scratch, "main.go")
	if err := os.WriteFile(mainGo, []byte(src), 0o644); err != nil {
		return "", "", err
	}
	pkg := snippetPkg + "/" + strings.Trim(unsafeRe.ReplaceAllString(b.Where(), "_"), "_")
	overlay, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(r.Root, filepath.FromSlash(pkg), "main.go"): mainGo},
	})
	if err != nil {
		return "", "", err
	}
	ov := filepath.Join(scratch, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return "", "", err
	}
	bin = filepath.Join(scratch, "program")
	ctx, cancel := context.WithTimeout(ctx, GoBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-overlay", ov, "-o", bin, "./"+pkg)
	cmd.Dir, cmd.WaitDelay = r.Root, waitDelay
	o, err := cmd.CombinedOutput()
	return bin, string(o), err
}
