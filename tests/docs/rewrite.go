package docs

import (
	"regexp"
	"strconv"
)

// The dev cluster's default ports, as `make run` serves them and the docs
// write them: lockd i's API and Raft ports, proxy i's API port, proxy i's
// etcd port (lockd dev --api-port, --raft-port, --proxy-port, --etcd-port).
const (
	defaultAPIPort   = 7001
	defaultRaftPort  = 7101
	defaultProxyPort = 7201
	defaultEtcdPort  = 2379
	etcdPortStride   = 100 // proxy i's etcd port is etcd-port + 100*(i-1)
)

// Ports are a dev cluster's actual ports: base ports as lockd dev takes them.
type Ports struct {
	API, Raft, Proxy, Etcd int // Etcd 0: no etcd gateway
	Lockds, Proxies        int
}

// Map is the rewrite of the default dev addresses to p's: default port →
// p's port.
func (p Ports) Map() map[int]int {
	m := map[int]int{}
	for i := 0; i < p.Lockds; i++ {
		m[defaultAPIPort+i] = p.API + i
		m[defaultRaftPort+i] = p.Raft + i
	}
	for i := 0; i < p.Proxies; i++ {
		m[defaultProxyPort+i] = p.Proxy + i
		if p.Etcd != 0 {
			m[defaultEtcdPort+etcdPortStride*i] = p.Etcd + etcdPortStride*i
		}
	}
	return m
}

var loopbackRe = regexp.MustCompile(`\b(127\.0\.0\.1|localhost):(\d+)\b`)

// Rewrite returns s with every loopback address on a port m maps moved to
// its port in m.
func Rewrite(s string, m map[int]int) string {
	return loopbackRe.ReplaceAllStringFunc(s, func(a string) string {
		sub := loopbackRe.FindStringSubmatch(a)
		port, err := strconv.Atoi(sub[2])
		if to, ok := m[port]; err == nil && ok {
			return sub[1] + ":" + strconv.Itoa(to)
		}
		return a
	})
}

// RewriteAll is Rewrite of each string.
func RewriteAll(ss []string, m map[int]int) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Rewrite(s, m)
	}
	return out
}
