package cluster

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
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
