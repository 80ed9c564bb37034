package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServePprof: profiles are served on a loopback address only (what
// was bound is checked, and the Host of each request), and the address
// bound is the one reported.
func TestServePprof(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "127.0.0.1.evil:0", "example.com:0", "nonsense"} {
		if _, stop, err := servePprof(addr); err == nil {
			_ = stop()
			t.Fatalf("--pprof-addr %s was served", addr)
		}
	}
	bound, stop, err := servePprof("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	get := func(host string) int {
		req, err := http.NewRequest("GET", "http://"+bound+"/debug/pprof/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 200 && !strings.Contains(string(b), "profile") {
			t.Fatalf("%s: not the profiles index", host)
		}
		return resp.StatusCode
	}
	if st := get(bound); st != 200 {
		t.Fatalf("Host %s: HTTP %d", bound, st)
	}
	if st := get("localhost"); st != 200 {
		t.Fatalf("Host localhost: HTTP %d", st)
	}
	if st := get("rebound.example.com"); st != http.StatusForbidden {
		t.Fatalf("Host rebound.example.com: HTTP %d, want 403", st)
	}
}
