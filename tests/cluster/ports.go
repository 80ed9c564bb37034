package cluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ports for the processes a test starts are drawn below the kernel's
// ephemeral range: a port from 127.0.0.1:0, closed and handed to a lockd
// to bind later, can meanwhile become the local port of any outgoing
// connection (another test's client, its proxy) and the lockd then fails
// with "address already in use".
//
// Below that range the only competitors are other tests, in this process
// and in the other test binaries `go test` runs beside it. A port handed to
// a lockd is unbound for a while (before the lockd binds it, and whenever a
// test kills and restarts that lockd), so a bind check alone cannot keep
// two tests apart. Ports are therefore handed out from blocks, and a block
// belongs to one test process: the process holds an exclusive flock on the
// block's file under the temporary directory, which the kernel releases
// when the process ends, so no stale reservation outlives its owner. A
// process never hands out a port twice.
const (
	// minTestPort is the lowest port drawn.
	minTestPort = 10000
	// defaultEphemeralLow is Linux's default start of the ephemeral range.
	defaultEphemeralLow = 32768
	// portBlock is the number of ports in one reserved block, and the
	// longest consecutive run FreePortRun can give.
	portBlock = 32
	// blockAttempts bounds the blocks tried for one reservation.
	blockAttempts = 400
	// portAttempts bounds the ports tried (bind checks) for one request.
	portAttempts = 4 * portBlock * 8
)

// portDir holds one lock file per block.
var portDir = filepath.Join(os.TempDir(), "lockd-test-ports")

// ports is this process's allocator.
var ports struct {
	mu    sync.Mutex
	held  []*os.File // the flocked block files, kept open for the process's life
	next  int        // next port to hand out in the current block
	limit int        // end (exclusive) of the current block; 0 when none
}

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
	if err != nil || low <= minTestPort+16*portBlock {
		return defaultEphemeralLow
	}
	return low
}

// reserveBlock takes a block no other live test process holds and makes it
// current. Callers hold ports.mu.
func reserveBlock() error {
	if err := os.MkdirAll(portDir, 0o777); err != nil {
		return fmt.Errorf("port blocks: %w", err)
	}
	blocks := (ephemeralLow() - minTestPort) / portBlock
	for attempt := 0; attempt < blockAttempts; attempt++ {
		b := rand.IntN(blocks)
		name := filepath.Join(portDir, "block-"+strconv.Itoa(b))
		f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return fmt.Errorf("port blocks: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close() // another process holds it (or this one already does)
			continue
		}
		ports.held = append(ports.held, f)
		ports.next = minTestPort + b*portBlock
		ports.limit = ports.next + portBlock
		return nil
	}
	return fmt.Errorf("port blocks: no free block in %d attempts", blockAttempts)
}

// bindable reports whether nothing listens on port now.
func bindable(port int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}

// takeRun hands out n consecutive bindable ports from this process's
// blocks and returns the first. Callers hold ports.mu.
func takeRun(n int) (int, error) {
	if n < 1 || n > portBlock {
		return 0, fmt.Errorf("free ports: a run of %d (1..%d)", n, portBlock)
	}
	tried := 0
	for tried < portAttempts {
		if ports.limit-ports.next < n {
			if err := reserveBlock(); err != nil {
				return 0, err
			}
		}
		base, ok := ports.next, true
		for i := 0; i < n; i++ {
			tried++
			if !bindable(base + i) {
				ports.next = base + i + 1 // skip past the taken port
				ok = false
				break
			}
		}
		if ok {
			ports.next = base + n
			return base, nil
		}
	}
	return 0, fmt.Errorf("free ports: no run of %d bindable ports in %d tries", n, portAttempts)
}

// freePorts finds n distinct free TCP ports on 127.0.0.1 below the
// ephemeral range, reserved for this process.
func freePorts(n int) ([]int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	out := make([]int, 0, n)
	for len(out) < n {
		p, err := takeRun(1)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// FreePortRun finds n (at most 32) consecutive free TCP ports on 127.0.0.1
// below the ephemeral range, reserved for this process (for `lockd dev`,
// which takes a base port), and returns the first.
func FreePortRun(n int) (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	return takeRun(n)
}
