package main

// --pprof-addr: Go's profiles of the proxy on a listener of their own,
// apart from the clients' port (a tenant never reaches them) and on
// loopback only (a heap profile shows request data).

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/lockservice/lockd/internal/mutant"
)

// servePprof serves /debug/pprof/ on addr, a loopback address, until
// the returned function closes it; bound is the address it listens on.
func servePprof(addr string) (bound string, stop func() error, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("--pprof-addr: %w", err)
	}
	if !loopback(host) {
		return "", nil, fmt.Errorf("--pprof-addr %s: profiles are served on a loopback address only (127.0.0.1:PORT)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--pprof-addr: %w", err)
	}
	// "localhost" is whatever the resolver says: check what was bound.
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !loopback(tcp.IP.String()) {
		_ = ln.Close()
		return "", nil, fmt.Errorf("--pprof-addr %s: bound %s, not a loopback address", addr, ln.Addr())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: loopbackHost(mux), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends when stop closes it
	return ln.Addr().String(), srv.Close, nil
}

// loopbackHost serves only requests whose Host names a loopback address
// or localhost: a web page on this machine cannot reach the profiles by
// rebinding a name of its own to 127.0.0.1.
func loopbackHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !loopback(host) {
			http.Error(w, "profiles are served to a loopback host only", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopback reports whether host is a loopback IP address or localhost.
func loopback(host string) bool {
	if mutant.On(mutant.PprofAnyAddr) {
		return true
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
