package cluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Ports for the processes a test starts are drawn below the kernel's
// ephemeral range: a port from 127.0.0.1:0, closed and handed to a lockd
// to bind later, can meanwhile become the local port of any outgoing
// connection (another test's client, its proxy) and the lockd then fails
// with "address already in use". Below the range only another test's own
// pick can take it, and each pick is tried with a bind first.
const (
	// minTestPort is the lowest port drawn.
	minTestPort = 10000
	// defaultEphemeralLow is Linux's default start of the ephemeral range.
	defaultEphemeralLow = 32768
	// portAttempts bounds the picks per port wanted.
	portAttempts = 200
)

// ephemeralLow is the start of the kernel's ephemeral port range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeralLow
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return defaultEphemeralLow
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= minTestPort+portAttempts {
		return defaultEphemeralLow
	}
	return low
}

// freePorts finds n distinct free TCP ports on 127.0.0.1 below the
// ephemeral range: it holds every listener open until all are found, then
// closes them.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	span := ephemeralLow() - minTestPort
	ports := make([]int, 0, n)
	for attempt := 0; len(ports) < n && attempt < portAttempts*n; attempt++ {
		port := minTestPort + rand.IntN(span)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken (or just picked by this call)
		}
		lns = append(lns, ln)
		ports = append(ports, port)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("free ports: %d of %d found below the ephemeral range", len(ports), n)
	}
	return ports, nil
}

// FreePortRun finds n consecutive free TCP ports on 127.0.0.1 below the
// ephemeral range (for `lockd dev`, which takes a base port) and returns
// the first.
func FreePortRun(n int) (int, error) {
	span := ephemeralLow() - minTestPort - n
	for attempt := 0; attempt < portAttempts; attempt++ {
		base := minTestPort + rand.IntN(span)
		var lns []net.Listener
		for i := 0; i < n; i++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			_ = ln.Close()
		}
		if len(lns) == n {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports below the ephemeral range in %d attempts", n, portAttempts)
}
