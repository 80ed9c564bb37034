package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// profile captures a CPU profile of the demo cell's leader while a case
// runs (--profile-dir; the cluster must serve /debug/pprof, as the one
// --start runs does) and returns a function that waits for it. The profile
// spans the case's duration less a second, at most a minute, so it covers
// the steady state and not the case's setup.
func (e *env) profile(ctx context.Context, name string) (wait func()) {
	if e.profileDir == "" {
		return func() {}
	}
	secs := int(min(e.duration-time.Second, time.Minute) / time.Second)
	if secs < 1 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.saveProfile(ctx, name, secs); err != nil {
			e.progress("profile %s: %v", name, err)
		}
	}()
	return func() { <-done }
}

func (e *env) saveProfile(ctx context.Context, name string, secs int) error {
	leader, err := leaderIndex(ctx, e.endpoints, "demo")
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", e.endpoints[leader], secs)
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: time.Duration(secs+30) * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s (is lockd running with --pprof?)", url, resp.Status)
	}
	if err := os.MkdirAll(e.profileDir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(e.profileDir, profileFileName(name)))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profileFileName turns a case name into a file name: "acquire c=32
// distinct" becomes "acquire-c-32-distinct.pprof".
func profileFileName(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-") + ".pprof"
}
