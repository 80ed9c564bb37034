package docs

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/lockservice/lockd/tests/cluster"
)

// BuildTimeout bounds the one build of the binaries.
const BuildTimeout = 5 * time.Minute

// binaries are the main packages the docs run as bin/NAME, as `make build`
// builds them.
var binaries = []string{"./server/cmd/lockd", "./proxy/cmd/lockproxy", "./ctl/cmd/lockctl", "./bench/cmd/lockbench"}

// BuildBinaries builds lockd, lockproxy, lockctl and lockbench from the
// module at root into dir, in one go build (with -tags lockd_mutants when
// the test binary runs a mutant, as tests/cluster builds them).
func BuildBinaries(root, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	args := append([]string{"build", "-o", dir + "/"}, cluster.MutantFlags()...)
	args = append(args, binaries...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
