package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/tlsutil"
	"github.com/lockservice/lockd/server/lockd"
)

// makeCerts makes (or keeps) the development CAs and certificates in
// DATA_DIR/tls, the API's and Raft's, and points the supervisor's own
// calls at the client certificate.
func (d *devCluster) makeCerts() error {
	dir, hosts := filepath.Join(d.dataDir, "tls"), []string{"127.0.0.1", "localhost"}
	var err error
	if d.node, d.client, err = tlsutil.DevCA(dir, hosts); err != nil {
		return fmt.Errorf("development certificates: %w", err)
	}
	if d.raft, err = tlsutil.DevRaftCA(dir, hosts); err != nil {
		return fmt.Errorf("development Raft certificates: %w", err)
	}
	tc, err := d.client.Client()
	if err != nil {
		return err
	}
	d.http.Transport = &http.Transport{TLSClientConfig: tc}
	return nil
}

// call makes one API request to a lockd as the supervisor (the client
// certificate and admin token when the cluster has them).
func (d devCluster) call(ctx context.Context, method, ep, route string, body []byte) (*http.Response, error) {
	scheme := "http"
	if d.tls {
		scheme = "https"
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, scheme+"://"+ep+route, rd)
	if err != nil {
		return nil, err
	}
	if d.tokenFile != "" {
		if tok, err := lockd.ReadToken(d.tokenFile); err == nil {
			req.Header.Set(api.HeaderAuth, "Bearer "+tok)
		}
	}
	return d.http.Do(req)
}

// adminToken makes the dev cluster's admin token file, or keeps the one a
// previous run made (the lockds' data outlives a run).
func (d *devCluster) adminToken() error {
	d.tokenFile = filepath.Join(d.dataDir, "admin.token")
	if _, err := lockd.ReadToken(d.tokenFile); err == nil {
		return nil
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	return os.WriteFile(d.tokenFile, []byte("lkd_admin_"+hex.EncodeToString(b[:])+"\n"), 0o600)
}
