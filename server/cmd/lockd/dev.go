package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// devCluster is the local cluster `make run` starts: five lockd processes
// on loopback, cells demo and payments.
type devCluster struct {
	dataDir  string
	lease    time.Duration
	replicas int
	apiBase  int
	raftBase int
	rttMS    int
	pprof    bool
	logdb    string
	cells    int
}

func devCommand() *cobra.Command {
	d := devCluster{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster: five lockd processes on loopback serving /demo and /payments",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return d.run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&d.dataDir, "data-dir", "./.lockd-dev", "where the replicas keep their data (kept across restarts)")
	f.DurationVar(&d.lease, "lease", 12*time.Second, "default session lease")
	f.IntVar(&d.replicas, "replicas", 5, "replicas per cell (5, or 3)")
	f.IntVar(&d.apiBase, "api-port", 7001, "API port of replica 1; replica i listens on api-port+i-1")
	f.IntVar(&d.raftBase, "raft-port", 7101, "Raft port of replica 1")
	f.IntVar(&d.rttMS, "rtt-ms", 100, "Raft tick in ms")
	f.IntVar(&d.cells, "cells", 2, "cells to run: demo (/demo), payments (/payments), then cell3 (/cell3) and on; each its own Raft group on every replica")
	f.BoolVar(&d.pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on every replica's API port")
	f.StringVar(&d.logdb, "logdb", "tiny", "LogDB memory preset of every replica (tiny keeps five replicas small; small is lockd serve's default)")
	return cmd
}

func (d devCluster) args(id int) []string {
	args := []string{"serve",
		"--id", fmt.Sprint(id),
		"--data-dir", filepath.Join(d.dataDir, fmt.Sprintf("replica-%d", id)),
		"--lease", d.lease.String(),
		"--rtt-ms", fmt.Sprint(d.rttMS),
		"--logdb", d.logdb,
	}
	for _, c := range d.cellSpecs() {
		args = append(args, "--cell", c)
	}
	for i := 1; i <= d.replicas; i++ {
		args = append(args, "--peer", fmt.Sprintf("%d,127.0.0.1:%d,127.0.0.1:%d", i, d.raftBase+i-1, d.apiBase+i-1))
	}
	if d.pprof {
		args = append(args, "--pprof")
	}
	return args
}

// cellSpecs names the cells as --cell takes them: NAME,SHARD,PREFIX.
func (d devCluster) cellSpecs() []string {
	var out []string
	for i := 1; i <= d.cells; i++ {
		name := fmt.Sprintf("cell%d", i)
		switch i {
		case 1:
			name = "demo"
		case 2:
			name = "payments"
		}
		out = append(out, fmt.Sprintf("%s,%d,/%s", name, i, name))
	}
	return out
}

// ports lists every address the replicas will listen on.
func (d devCluster) ports() []portUse {
	var out []portUse
	for i := 1; i <= d.replicas; i++ {
		out = append(out,
			portUse{addr: fmt.Sprintf("127.0.0.1:%d", d.apiBase+i-1), kind: "api", replica: uint64(i)},
			portUse{addr: fmt.Sprintf("127.0.0.1:%d", d.raftBase+i-1), kind: "raft", replica: uint64(i)})
	}
	return out
}

func (d devCluster) endpoints() []string {
	var out []string
	for i := 1; i <= d.replicas; i++ {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", d.apiBase+i-1))
	}
	return out
}

func (d devCluster) run() error {
	if d.replicas != 5 && d.replicas != 3 {
		return fmt.Errorf("--replicas must be 5 or 3")
	}
	if d.cells < 1 || d.cells > 64 {
		return fmt.Errorf("--cells must be 1 to 64")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.dataDir, 0o755); err != nil {
		return err
	}
	if err := checkPorts(d.ports()); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	superviseFromMainThread()

	var (
		wg    sync.WaitGroup
		procs []*exec.Cmd
		exits = make(chan int, d.replicas)
	)
	for id := 1; id <= d.replicas; id++ {
		cmd := exec.Command(self, d.args(id)...)
		cmd.SysProcAttr = replicaAttr()
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			for _, p := range procs {
				_ = p.Process.Signal(syscall.SIGTERM)
			}
			return fmt.Errorf("start replica %d: %w", id, err)
		}
		procs = append(procs, cmd)
		wg.Add(1)
		go func(id int, r io.Reader) {
			defer wg.Done()
			prefix(os.Stderr, fmt.Sprintf("[replica-%d] ", id), r)
		}(id, out)
		go func(id int, cmd *exec.Cmd) {
			_ = cmd.Wait()
			exits <- id
		}(id, cmd)
	}
	fmt.Printf("lockd dev cluster: %d replicas, cells (name,shard,prefix) %s, data in %s\n", d.replicas, strings.Join(d.cellSpecs(), " "), d.dataDir)
	fmt.Printf("endpoints: %s\n", strings.Join(d.endpoints(), ","))
	fmt.Printf("try: lockctl status; lockctl put /demo/hello world; lockctl get /demo/hello\n")

	alive := d.replicas
	for alive > 0 {
		select {
		case <-ctx.Done():
			fmt.Println("stopping the dev cluster")
			for _, p := range procs {
				_ = p.Process.Signal(syscall.SIGTERM)
			}
			deadline := time.After(15 * time.Second)
			for alive > 0 {
				select {
				case <-exits:
					alive--
				case <-deadline:
					for _, p := range procs {
						_ = p.Process.Kill()
					}
					wg.Wait()
					return fmt.Errorf("replicas did not stop in 15s; killed")
				}
			}
		case id := <-exits:
			alive--
			fmt.Fprintf(os.Stderr, "replica %d exited; %d still running\n", id, alive)
		}
	}
	wg.Wait()
	return nil
}

func prefix(w io.Writer, p string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintln(w, p+sc.Text())
	}
}
