package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/tlsutil"
)

// TestEtcdRequiresClientCert: with mutual TLS on the client listener, the
// etcd port refuses a client without a certificate the CA signed (the
// gateway's requests skip the proxy's own certificate check, so the
// port must make it), and serves one with such a certificate. Attack
// review, session 34: before the fix the etcd port served every client
// that trusted the server, and with auth off (mTLS-only clusters) such a
// client was an admin.
func TestEtcdRequiresClientCert(t *testing.T) {
	node, client, err := tlsutil.DevCA(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	srvTLS, err := node.Server()
	if err != nil {
		t.Fatal(err)
	}
	_, p := startOnFake(t, Config{EtcdListen: "127.0.0.1:0", TLS: srvTLS})
	withCert, err := client.Client()
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(client.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	noCert := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}

	cases := []struct {
		name string
		tls  *tls.Config
		ok   bool
	}{
		{"no client certificate", noCert, false},
		{"client certificate", withCert, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.EtcdAddr()}, DialTimeout: 5 * time.Second,
				TLS: c.tls, Logger: zap.NewNop()})
			if err != nil {
				if c.ok {
					t.Fatal(err)
				}
				return
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = cli.Put(ctx, "/demo/mtls", "v")
			if (err == nil) != c.ok {
				t.Fatalf("put: %v, want ok=%v", err, c.ok)
			}
		})
	}
}

// TestEtcdBackendReadsLargeAnswers: the gateway's client of its proxy
// reads an answer as large as a lockd gives (a range of
// api.MaxRangeBytes of values), not only 1 MiB: past that, ranges and
// change reads failed as "outcome unknown" and a tenant's large values
// wedged every watch of its prefix. Attack review, session 34.
func TestEtcdBackendReadsLargeAnswers(t *testing.T) {
	ln := fasthttputil.NewInmemoryListener()
	value := make([]byte, api.MaxValueSize)
	var nodes []api.Node
	for i := 0; i*api.MaxValueSize < 3<<20; i++ { // 3 MiB of values
		nodes = append(nodes, api.Node{Path: fmt.Sprintf("/demo/k%03d", i), Value: value})
	}
	body, err := json.Marshal(api.RangeResponse{Nodes: nodes, Count: len(nodes), Index: 7})
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBody(body) }}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()
	b := &etcdBackend{ln: ln, cl: newEtcdClient(ln)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp api.RangeResponse
	if err := b.call(ctx, "t", api.RouteRange, api.RangeRequest{Root: "/demo", Start: "/demo"}, &resp); err != nil {
		t.Fatalf("a %d-byte range answer: %v", len(body), err)
	}
	if len(resp.Nodes) != len(nodes) {
		t.Fatalf("%d nodes, want %d", len(resp.Nodes), len(nodes))
	}
}
