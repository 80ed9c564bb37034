package docs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockservice/lockd/tests/cluster"
)

// dirEnv names, in the block's bash, the directory of its commands'
// outputs and statuses (N.out, N.err, N.rc).
const dirEnv = "DOCTEST_DIR"

// session is one shell block's bash: commands are written to its stdin
// one at a time, as a user types them into one shell (variables, $!,
// wait and kill carry), each one's stdout and stderr kept apart.
type session struct {
	b       *Block
	env     *Env
	dir     string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  syncBuffer // bash's own (syntax errors, job messages)
	done    chan struct{}
	jobs    []job
	bang    string        // $! after the last command
	timeout time.Duration // of each command
}

// runShell runs a shell block's commands in order in one bash, stopping
// at the first that fails or does not print its expected lines; jobs
// still running when it ends are stopped by PID.
func runShell(ctx context.Context, env *Env, b *Block, dir string, timeout time.Duration) error {
	s, err := startSession(env, b, dir, timeout)
	if err != nil {
		return fmt.Errorf("%s: bash: %w", b.Where(), err)
	}
	for n, c := range b.Commands {
		if err := s.run(ctx, n, c); err != nil {
			s.stopJobs()
			s.close()
			return err
		}
	}
	return s.finish()
}

func startSession(env *Env, b *Block, dir string, timeout time.Duration) (*session, error) {
	s := &session{b: b, env: env, dir: dir, timeout: timeout, done: make(chan struct{})}
	s.cmd = exec.Command("bash", "--noprofile", "--norc", "-s")
	s.cmd.Dir = env.Dir
	s.cmd.Env = append(slices.Clone(env.Vars), dirEnv+"="+dir)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.cmd.Stdout, s.cmd.Stderr = &s.stderr, &s.stderr
	s.cmd.WaitDelay = waitDelay
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cluster.StartProcess(s.cmd); err != nil {
		return nil, err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

// file is command n's file ext in the session's directory.
func (s *session) file(n int, ext string) string {
	return filepath.Join(s.dir, strconv.Itoa(n)+"."+ext)
}

// script is what the bash is given for command n: the command in a group
// whose stdout and stderr go to n's files, then its status and $!. A
// command that backgrounds itself, or that a marker backgrounds, runs
// with job control on, so its job is a process group of its own.
func script(n int, c Command, text string) string {
	f := func(ext string) string { return `"$` + dirEnv + `/` + strconv.Itoa(n) + "." + ext + `"` }
	group := "{ " + text + "\n} </dev/null >" + f("out") + " 2>" + f("err")
	switch {
	case c.Background:
		return "set -m; ( " + group + "; echo $? >" + f("exit") + " ) & echo \"0 $!\" >" + f("rc") + "; set +m\n"
	case c.Amp:
		return "set -m; " + group + "; echo \"$? $!\" >" + f("rc") + "; set +m\n"
	}
	return group + "; echo \"$? $!\" >" + f("rc") + "\n"
}

// run runs command n and checks its status and its expected lines (a
// background command: that it prints them while it runs).
func (s *session) run(ctx context.Context, n int, c Command) error {
	text := Rewrite(c.Text, s.env.Ports)
	want, expect := splitExit(RewriteAll(c.Expect, s.env.Ports))
	if _, err := io.WriteString(s.stdin, script(n, c, text)); err != nil {
		return s.fail(n, c, text, "writing to bash: "+err.Error())
	}
	rc, bang, err := s.waitRC(ctx, n)
	if err != nil {
		return s.fail(n, c, text, err.Error())
	}
	if bang != "" && bang != s.bang {
		s.bang = bang
		s.addJob(bang)
	}
	if c.Background || c.Amp {
		if err := s.await(n, c, expect); err != nil {
			return s.fail(n, c, text, err.Error())
		}
		return nil
	}
	if rc != want {
		why := fmt.Sprintf("exit status %d", rc)
		if want != 0 {
			why += fmt.Sprintf(", want %d", want)
		}
		return s.fail(n, c, text, why)
	}
	if err := Match(s.read(n, "out"), expect); err != nil {
		return s.fail(n, c, text, err.Error())
	}
	return nil
}

// waitRC waits, within the session's timeout, for command n's status and $!.
func (s *session) waitRC(ctx context.Context, n int) (rc int, bang string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for {
		if line := s.read(n, "rc"); strings.HasSuffix(line, "\n") {
			f := strings.Fields(line)
			rc, err = strconv.Atoi(f[0])
			if len(f) > 1 {
				bang = f[1]
			}
			return rc, bang, err
		}
		select {
		case <-s.done:
			return 0, "", errors.New("bash exited before the command ended (an exit in the block?)")
		case <-ctx.Done():
			s.stopJobs()
			s.kill()
			return 0, "", fmt.Errorf("no exit within %v (killed)", s.timeout)
		case <-time.After(pollEvery):
		}
	}
}

// read is command n's file ext ("" if none yet).
func (s *session) read(n int, ext string) string {
	b, _ := os.ReadFile(s.file(n, ext))
	return string(b)
}

// fail describes command n's failure with what it printed.
func (s *session) fail(n int, c Command, text, why string) error {
	stderr := s.read(n, "err")
	if own := s.stderr.String(); own != "" {
		stderr += "--- bash:\n" + own
	}
	return commandError(s.b, c, text, why, s.read(n, "out"), stderr)
}

// finish ends the block: a command a marker backgrounded must still run
// (or have exited 0); every job left is stopped, then the bash.
func (s *session) finish() error {
	var errs []error
	for n, c := range s.b.Commands {
		if !c.Background {
			continue
		}
		if st := strings.TrimSpace(s.read(n, "exit")); st != "" && st != "0" {
			text := Rewrite(c.Text, s.env.Ports)
			errs = append(errs, s.fail(n, c, text, "exited with status "+st+" before the block ended"))
		}
	}
	s.stopJobs()
	s.close()
	return errors.Join(errs...)
}

// close ends the bash: end of input, or SIGKILL to its process group
// after BackgroundStop.
func (s *session) close() {
	_ = s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(BackgroundStop):
		s.kill()
	}
}

// kill kills the bash's process group (it and its foreground commands)
// and waits for it.
func (s *session) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}
