package integration_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockservice/lockd/api"
)

// Attack review of the etcd gateway (session 34), on real processes.

// etcdAttackTimeout bounds each step of these tests.
const etcdAttackTimeout = 60 * time.Second

// TestEtcdAttackMTLSRequired: on a mutual-TLS cluster (auth off: the
// certificate is the credential), the etcd port refuses a client that
// trusts the server but has no client certificate. Before the fix it
// served it, as an admin.
func TestEtcdAttackMTLSRequired(t *testing.T) {
	t.Parallel() // its own cluster; it asserts no timing
	g := startEtcdGW(t, etcdMTLS)
	// Served first with a certificate: a refusal below is then the
	// missing certificate's, not a gateway still starting.
	g.waitGateway(t, g.client(t))
	pem, err := os.ReadFile(g.tls.CA)
	must(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{g.addr}, DialTimeout: etcdDialTimeout,
		TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, Logger: zap.NewNop()})
	if err == nil {
		defer cli.Close()
		ctx, cancel := ctxFor(15 * time.Second)
		defer cancel()
		if _, err = cli.Put(ctx, "/demo/attack-mtls", "x"); err == nil {
			t.Fatal("a client without a certificate wrote through the etcd port")
		}
	}
	ok := g.client(t) // with the client certificate: served
	ctx, cancel := ctxFor(etcdAttackTimeout)
	defer cancel()
	if _, err := ok.Put(ctx, "/demo/attack-mtls", "y"); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
}

// TestEtcdAttackLargeValues: a prefix holding more than 1 MiB of values
// is read whole by a range, and a watch on it sees every put of large
// values (before the fix, the gateway's client of its proxy read answers
// of at most 1 MiB: the range failed "outcome unknown" and the change
// feed's reads failed until every watch of the prefix was canceled).
func TestEtcdAttackLargeValues(t *testing.T) {
	t.Parallel() // its own cluster; it asserts no timing
	g := startEtcdGW(t, etcdPlain)
	cli := g.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*etcdAttackTimeout)
	defer cancel()
	const n = 24 // 24 values of 60 KiB: ~1.4 MiB, ~1.9 MiB as JSON
	wc := cli.Watch(ctx, "/demo/big/", clientv3.WithPrefix())
	value := bytes.Repeat([]byte("v"), 60<<10)
	for i := range n {
		if _, err := cli.Put(ctx, fmt.Sprintf("/demo/big/k%02d", i), string(value)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	got := 0
	for got < n {
		select {
		case r, open := <-wc:
			if !open || r.Canceled || r.Err() != nil {
				t.Fatalf("watch ended after %d of %d events: %v", got, n, r.Err())
			}
			got += len(r.Events)
		case <-time.After(etcdAttackTimeout):
			t.Fatalf("watch stalled after %d of %d events", got, n)
		}
	}
	resp, err := cli.Get(ctx, "/demo/big/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("range over %d large values: %v", n, err)
	}
	if len(resp.Kvs) != n || len(resp.Kvs[0].Value) != len(value) {
		t.Fatalf("range: %d keys, want %d", len(resp.Kvs), n)
	}
	_ = api.MaxValueSize
}
