package cluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Network places replicas on addresses other than 127.0.0.1 and wraps the
// command line that starts them. The chaos suite uses Netns: one network
// namespace per replica, so that links between replicas can be cut.
type Network interface {
	// Host is the IP address replica id listens on, for its API and Raft.
	// The test process must be able to reach it.
	Host(id int) string
	// Command returns the program and arguments that run bin with args as
	// replica id. The program must exec bin in the end, so that the
	// process's PID is lockd's (signals go to it by PID).
	Command(id int, bin string, args []string) (prog string, argv []string)
}

// Ports a replica listens on at its Network host: every replica has a host
// address of its own, so they can all use the same ones.
const (
	NetworkAPIPort  = 7000
	NetworkRaftPort = 7100
)

func networkAddrs(n Network, id int) (apiAddr, raftAddr string) {
	h := n.Host(id)
	return net.JoinHostPort(h, strconv.Itoa(NetworkAPIPort)), net.JoinHostPort(h, strconv.Itoa(NetworkRaftPort))
}

// StartProcess starts cmd the way the harness starts lockd: on Linux the
// child gets SIGKILL when the test binary dies (PR_SET_PDEATHSIG, forked
// from a thread that never exits). The chaos suite starts its helper
// processes (a lock holder it can SIGSTOP) with it.
func StartProcess(cmd *exec.Cmd) error {
	if cmd == nil {
		return fmt.Errorf("testcluster: nil command")
	}
	return start(cmd)
}

// Delay is a range of delays (Options.RaftDelay).
type Delay struct{ Min, Max time.Duration }

// RelayPkg is the relay command the harness runs for Options.RaftDelay.
const RelayPkg = "./tests/cluster/cmd/delayrelay"

// startRelays starts one delayrelay per lockd, on the Raft address its
// peers dial, relaying to the address it binds; they live until Close.
func (c *Cluster) startRelays() error {
	bin, err := BuildBinary(RelayPkg)
	if err != nil {
		return err
	}
	d := c.opts.RaftDelay
	for _, p := range c.procs {
		args := []string{"--listen", p.node.RaftAddr, "--to", p.raftListen, "--min", d.Min.String(), "--max", d.Max.String()}
		cmd := exec.Command(bin, args...)
		if c.opts.Network != nil {
			prog, argv := c.opts.Network.Command(p.node.ID, bin, args)
			cmd = exec.Command(prog, argv...)
		}
		f, err := os.OpenFile(filepath.Join(c.dir, fmt.Sprintf("relay-%d.log", p.node.ID)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		cmd.Stdout, cmd.Stderr = f, f
		err = start(cmd)
		f.Close()
		if err != nil {
			return fmt.Errorf("start the Raft relay of replica %d: %w", p.node.ID, err)
		}
		c.relays = append(c.relays, cmd)
		c.opts.Logf("testcluster: replica %d's Raft behind a relay %s -> %s (%v to %v each way, pid %d)", p.node.ID, p.node.RaftAddr, p.raftListen, d.Min, d.Max, cmd.Process.Pid)
	}
	return nil
}
