//go:build linux

package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NetnsPrefix begins the name of every namespace and link Netns creates;
// SweepNetns removes leftovers with it.
const NetnsPrefix = "lcx"

// netnsSubnetBase is the private range the namespaces are numbered in:
// 10.211.<subnet>.0/24, one /24 per Netns. It exists only inside this
// machine (a bridge in the root namespace).
const netnsSubnetBase = "10.211"

// ipTimeout bounds one `ip` command.
const ipTimeout = 10 * time.Second

var (
	reNetns  = regexp.MustCompile(`^` + NetnsPrefix + `(\d+)-(\d+)-r(\d+)$`)
	reBridge = regexp.MustCompile(`^` + NetnsPrefix + `(\d+)b(\d+)$`)
	reHostV  = regexp.MustCompile(`^` + NetnsPrefix + `(\d+)h(\d+)$`)
)

// Netns is a Network that runs every replica in a network namespace of its
// own: a veth pair from each namespace into one bridge in the root
// namespace, which carries 10.211.S.1/24, so the test process reaches every
// replica's API over the bridge and the replicas reach each other through
// it. Links are cut per destination with blackhole routes inside the
// namespaces (`ip route add blackhole PEER/32`): a cut is exact per pair
// and direction, and healing deletes the routes. (tc netem would add delay
// and loss, but this machine's kernel has no sch_netem.)
//
// Names carry the owner's PID (namespaces lcx<S>-<pid>-r<id>, bridge
// lcx<S>b<pid>, host-side veths lcx<S>h<id>); SweepNetns deletes those
// whose owner is dead. Close deletes everything this Netns made. It needs
// root (CAP_NET_ADMIN, CAP_SYS_ADMIN); see NetnsAvailable.
type Netns struct {
	subnet   int
	replicas int
	pid      int
	bridge   string
	logf     func(string, ...any)

	mu     sync.Mutex
	nss    []string        // namespaces created, in id order
	hostvs []string        // host-side veths created
	cut    map[[2]int]bool // [from, to]: to's address is blackholed in from's namespace
	closed bool
}

// NetnsAvailable reports why Netns cannot be used here, nil if it can.
func NetnsAvailable() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("no ip command: %w", err)
	}
	if _, err := runIP("netns", "list"); err != nil {
		return err
	}
	return nil
}

// NewNetns creates the namespaces, veths and bridge for replicas
// replicas. logf may be nil. On error everything made so far is removed.
func NewNetns(replicas int, logf func(string, ...any)) (*Netns, error) {
	if err := NetnsAvailable(); err != nil {
		return nil, err
	}
	if replicas < 1 || replicas > 9 {
		return nil, fmt.Errorf("netns: %d replicas (1..9)", replicas)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	unlock, err := lockNetnsAlloc()
	if err != nil {
		return nil, err
	}
	defer unlock()
	SweepNetns(logf)
	used, err := usedSubnets()
	if err != nil {
		return nil, err
	}
	n := &Netns{replicas: replicas, pid: os.Getpid(), logf: logf, cut: map[[2]int]bool{}}
	for s, i := n.pid%200+1, 0; i < 250; s, i = s%250+1, i+1 {
		if !used[s] {
			n.subnet = s
			break
		}
	}
	if n.subnet == 0 {
		return nil, errors.New("netns: no free subnet")
	}
	n.bridge = fmt.Sprintf("%s%db%d", NetnsPrefix, n.subnet, n.pid)
	if err := n.setup(); err != nil {
		n.Close()
		return nil, err
	}
	logf("testcluster: netns: %d namespaces on bridge %s (%s.%d.0/24)", replicas, n.bridge, netnsSubnetBase, n.subnet)
	return n, nil
}

func (n *Netns) setup() error {
	cidr := func(host int) string { return fmt.Sprintf("%s.%d.%d/24", netnsSubnetBase, n.subnet, host) }
	if _, err := runIP("link", "add", n.bridge, "type", "bridge"); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"addr", "add", cidr(1), "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	} {
		if _, err := runIP(args...); err != nil {
			return err
		}
	}
	for id := 1; id <= n.replicas; id++ {
		ns := n.Namespace(id)
		hostv := fmt.Sprintf("%s%dh%d", NetnsPrefix, n.subnet, id)
		nsv := n.nsVeth(id)
		if _, err := runIP("netns", "add", ns); err != nil {
			return err
		}
		n.mu.Lock()
		n.nss = append(n.nss, ns)
		n.mu.Unlock()
		if _, err := runIP("link", "add", hostv, "type", "veth", "peer", "name", nsv); err != nil {
			return err
		}
		n.mu.Lock()
		n.hostvs = append(n.hostvs, hostv)
		n.mu.Unlock()
		for _, args := range [][]string{
			{"link", "set", nsv, "netns", ns},
			{"link", "set", hostv, "master", n.bridge},
			{"link", "set", hostv, "up"},
			{"-n", ns, "addr", "add", cidr(10 + id), "dev", nsv},
			{"-n", ns, "link", "set", nsv, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
		} {
			if _, err := runIP(args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Namespace is the name of replica id's network namespace.
func (n *Netns) Namespace(id int) string {
	return fmt.Sprintf("%s%d-%d-r%d", NetnsPrefix, n.subnet, n.pid, id)
}

func (n *Netns) nsVeth(id int) string { return fmt.Sprintf("%s%dn%d", NetnsPrefix, n.subnet, id) }

// Bridge is the name of the bridge in the root namespace.
func (n *Netns) Bridge() string { return n.bridge }

// Host is replica id's address, 10.211.S.(10+id).
func (n *Netns) Host(id int) string {
	return fmt.Sprintf("%s.%d.%d", netnsSubnetBase, n.subnet, 10+id)
}

// Command runs bin inside replica id's namespace: `ip netns exec NS bin
// args...`. ip execs bin after entering the namespace, so the PID the
// harness holds is lockd's own.
func (n *Netns) Command(id int, bin string, args []string) (string, []string) {
	ip, err := exec.LookPath("ip")
	if err != nil {
		ip = "ip"
	}
	return ip, append([]string{"netns", "exec", n.Namespace(id), bin}, args...)
}

func (n *Netns) checkID(id int) error {
	if id < 1 || id > n.replicas {
		return fmt.Errorf("netns: no replica %d (1..%d)", id, n.replicas)
	}
	return nil
}

// Cut drops all traffic between replicas a and b, both directions.
func (n *Netns) Cut(a, b int) error {
	if err := n.checkID(a); err != nil {
		return err
	}
	if err := n.checkID(b); err != nil {
		return err
	}
	if a == b {
		return nil
	}
	return errors.Join(n.cutDirected(a, b), n.cutDirected(b, a))
}

func (n *Netns) cutDirected(from, to int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("netns: closed")
	}
	if n.cut[[2]int{from, to}] {
		return nil
	}
	if _, err := runIP("-n", n.Namespace(from), "route", "add", "blackhole", n.Host(to)+"/32"); err != nil {
		return err
	}
	n.cut[[2]int{from, to}] = true
	return nil
}

// Partition cuts every link between replicas in different groups; links
// inside a group are left as they are.
func (n *Netns) Partition(groups ...[]int) error {
	var errs []error
	for i, g := range groups {
		for _, h := range groups[i+1:] {
			for _, a := range g {
				for _, b := range h {
					errs = append(errs, n.Cut(a, b))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Isolate cuts replica id off from every other replica (the test process
// still reaches it over the bridge).
func (n *Netns) Isolate(id int) error {
	var others []int
	for o := 1; o <= n.replicas; o++ {
		if o != id {
			others = append(others, o)
		}
	}
	return n.Partition([]int{id}, others)
}

// Cuts lists the directed cuts in force, [from, to], sorted.
func (n *Netns) Cuts() [][2]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([][2]int, 0, len(n.cut))
	for c := range n.cut {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][0] != out[j][0] {
			return out[i][0] < out[j][0]
		}
		return out[i][1] < out[j][1]
	})
	return out
}

// Heal deletes every blackhole route this Netns added.
func (n *Netns) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for c := range n.cut {
		if _, err := runIP("-n", n.Namespace(c[0]), "route", "del", "blackhole", n.Host(c[1])+"/32"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(n.cut, c)
	}
	return errors.Join(errs...)
}

// Close deletes the namespaces, veths and bridge. Processes still inside a
// namespace keep it alive (unnamed) until they exit; stop the cluster
// first. Close is idempotent.
func (n *Netns) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	nss, hostvs := n.nss, n.hostvs
	n.mu.Unlock()
	var errs []error
	for _, ns := range nss {
		if _, err := runIP("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, v := range hostvs {
		if linkExists(v) {
			_, _ = runIP("link", "del", v)
		}
	}
	if n.bridge != "" && linkExists(n.bridge) {
		if _, err := runIP("link", "del", n.bridge); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SweepNetns deletes namespaces and links with NetnsPrefix whose owning
// process is gone (a run that was killed before its cleanup ran). Those of
// live processes, including this one, are left alone. logf may be nil.
func SweepNetns(logf func(string, ...any)) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if NetnsAvailable() != nil {
		return
	}
	out, err := runIP("netns", "list")
	if err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			m := reNetns.FindStringSubmatch(f[0])
			if m == nil || pidAlive(m[2]) {
				continue
			}
			if _, err := runIP("netns", "del", f[0]); err == nil {
				logf("testcluster: netns: swept leftover namespace %s", f[0])
			}
		}
	}
	live := map[string]bool{} // subnets with a live owner
	links, _ := linkNames()
	for _, l := range links {
		if m := reBridge.FindStringSubmatch(l); m != nil {
			if pidAlive(m[2]) {
				live[m[1]] = true
				continue
			}
			if _, err := runIP("link", "del", l); err == nil {
				logf("testcluster: netns: swept leftover bridge %s", l)
			}
		}
	}
	for _, l := range links {
		if m := reHostV.FindStringSubmatch(l); m != nil && !live[m[1]] {
			if _, err := runIP("link", "del", l); err == nil {
				logf("testcluster: netns: swept leftover veth %s", l)
			}
		}
	}
}

func pidAlive(s string) bool {
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// usedSubnets are the subnets of bridges that exist (any owner).
func usedSubnets() (map[int]bool, error) {
	links, err := linkNames()
	if err != nil {
		return nil, err
	}
	used := map[int]bool{}
	for _, l := range links {
		if m := reBridge.FindStringSubmatch(l); m != nil {
			s, _ := strconv.Atoi(m[1])
			used[s] = true
		}
	}
	return used, nil
}

// linkNames lists the root namespace's links.
func linkNames() ([]string, error) {
	out, err := runIP("-o", "link", "show")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		// "12: lcx5h1@if11: <BROADCAST,...> ..."
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := strings.TrimSuffix(f[1], ":")
		if i := strings.IndexByte(name, '@'); i >= 0 {
			name = name[:i]
		}
		names = append(names, name)
	}
	return names, nil
}

func linkExists(name string) bool {
	_, err := runIP("link", "show", "dev", name)
	return err == nil
}

// lockNetnsAlloc serialises subnet allocation between processes.
func lockNetnsAlloc() (func(), error) {
	path := filepath.Join(os.TempDir(), "lockd-testcluster-netns.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("netns: allocation lock %s: %w", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func runIP(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ipTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
