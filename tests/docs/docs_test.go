package docs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/tests/cluster"
)

// filesDir holds the user's files a files marker names.
const filesDir = "testdata/files"

// TestDocs runs every shell and Go block of README.md and docs/*.md, in
// order, against dev clusters of the binaries built fresh: `bin/lockd dev
// --etcd`, and for blocks marked auth `bin/lockd dev --auth`. It logs the
// list of blocks run and skipped, and fails on every block that fails.
func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two dev clusters (12 lockds, 4 proxies): not with -short")
	}
	start := time.Now()
	root := moduleRoot(t)
	blocks, errs := Load(root)
	for _, err := range errs {
		t.Error(err)
	}
	bin := t.TempDir()
	if err := BuildBinaries(root, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("binaries built in %v", time.Since(start).Round(time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &Runner{Root: root, FilesDir: absPath(t, filesDir), Tmp: t.TempDir(), RequireTools: os.Getenv(RequireToolsEnv) == "1"}
	devs := []*Dev{startDev(t, "dev", bin, false)}
	r.Plain = devs[0].Env()
	if needsAuth(blocks) {
		devs = append(devs, startDev(t, "dev --auth", bin, true))
		r.Auth = devs[1].Env()
	}
	stopAll(t, devs)
	r.Prebuild(ctx, blocks) // while the clusters start
	for _, d := range devs {
		if err := d.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("clusters ready at %v", time.Since(start).Round(time.Second))
	var list []string
	for i := range blocks {
		res := r.Run(ctx, &blocks[i])
		list = append(list, res.String())
		if res.Status == Failed {
			t.Errorf("%s", res.Detail)
		}
	}
	t.Logf("snippets of README.md and docs/*.md, run by %v:\n%s", time.Since(start).Round(time.Second), strings.Join(list, "\n"))
}

// needsAuth reports whether a block to run is marked auth.
func needsAuth(blocks []Block) bool {
	for _, b := range blocks {
		if b.Auth && b.Skip == "" && b.Kind != Other {
			return true
		}
	}
	return false
}

// startDev starts a dev cluster, with the etcd gateway, in a working
// directory of its own whose bin/ is the built binaries.
func startDev(t *testing.T, name, bin string, auth bool) *Dev {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	ports, err := AllocPorts(true)
	if err != nil {
		t.Fatal(err)
	}
	d, err := StartDev(name, dir, ports, auth)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// stopAll stops the clusters by PID at the test's end, together, and
// logs what each printed if the test failed.
func stopAll(t *testing.T, devs []*Dev) {
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, d := range devs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := d.Stop(); err != nil {
					t.Logf("stopping %s: %v", d.Name, err)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			for _, d := range devs {
				t.Logf("%s printed:\n%s", d.Name, tail(d.Log()))
			}
		}
	})
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := cluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func absPath(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
