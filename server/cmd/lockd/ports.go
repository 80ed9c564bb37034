package main

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// portUse is one address a replica is about to listen on.
type portUse struct {
	addr    string
	kind    string // "api", "raft", "proxy" or "etcd" (a proxy's etcd port)
	replica uint64
}

// checkPorts fails, naming the first address already taken, before anything
// starts: a half-started cluster (some replicas up, one dead on bind) is
// harder to read than one line saying which port to free. Other listen
// errors (an address not on this host) are left to the real listen.
func checkPorts(uses []portUse) error {
	for _, u := range uses {
		ln, err := net.Listen("tcp", u.addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			if u.kind == "proxy" || u.kind == "etcd" || u.kind == "pprof" {
				return fmt.Errorf("port %s (%s of proxy %d) is already in use", u.addr, u.kind, u.replica)
			}
			return fmt.Errorf("port %s (%s of replica %d) is already in use", u.addr, u.kind, u.replica)
		}
		if err == nil {
			_ = ln.Close()
		}
	}
	return nil
}
