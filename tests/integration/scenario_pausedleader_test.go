package integration_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockservice/lockd/tests/cluster"
)

// TestPausedLeaderExample runs the runnable example sdk/examples/pausedleader
// (its coordinator, which starts two worker processes of its own) against a
// real cluster: worker A holds the lock and writes to the coordinator's
// fenced HTTP resource; it is SIGSTOPped with a write prepared, past its 3 s
// lease; worker B takes over, fences first and writes; A resumes and its
// late write is refused with 409. The example checks every step itself and
// exits 0 only if the story happened; this test checks its exit status and
// the lines that tell the story.
func TestPausedLeaderExample(t *testing.T) {
	t.Parallel()
	bin := cluster.Build(t, "./sdk/examples/pausedleader")
	c := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--endpoints", strings.Join(c.Endpoints(), ","),
		"--lock", "/demo/example/pausedleader",
		"--lease", "3s", "--timeout", "100s")
	// Its own process group, so a timeout kills the workers too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("pausedleader output:\n%s", out.String())
	if err != nil {
		t.Fatalf("pausedleader: %v", err)
	}
	for _, want := range []string{
		"[A] holding", "[B] holding", "[B] fenced name=B", "paused A", "takeover: B holds",
		"[A] refused name=A", "status=409", "OK: the paused holder's late write was refused",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if _, after, ok := strings.Cut(out.String(), "resumed A"); !ok || strings.Contains(after, "[A] wrote") {
		t.Error("A wrote after it resumed")
	}
}
