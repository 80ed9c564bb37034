package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockservice/lockd/api"
)

// TestEtcdDecodeAnswer: a refusal comes back as its *api.Error; an answer
// whose outcome is unknown (no error body) never reads as a refusal.
func TestEtcdDecodeAnswer(t *testing.T) {
	cases := []struct {
		name    string
		code    int
		body    string
		refusal api.Code // "" : not an *api.Error
		ok      bool
	}{
		{"ok", 200, `{"index":7}`, "", true},
		{"refusal", 403, `{"error":{"code":"forbidden","message":"no"}}`, api.CodeForbidden, false},
		{"unavailable", 503, `{"error":{"code":"unavailable"}}`, api.CodeUnavailable, false},
		{"no body", 502, ``, "", false},
		{"not json", 500, `<html>`, "", false},
		{"empty code", 400, `{"error":{}}`, "", false},
	}
	for _, c := range cases {
		var resp api.WriteResponse
		err := decodeAnswer("/v1/node/put", c.code, []byte(c.body), &resp)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v", c.name, err)
			continue
		}
		var ae *api.Error
		if got := errors.As(err, &ae); got != (c.refusal != "") || (got && ae.Code != c.refusal) {
			t.Errorf("%s: %v, want refusal %q", c.name, err, c.refusal)
		}
	}
}

// TestEtcdGatewayForwardsTheCallersToken: an etcd client's put through
// lockproxy --etcd-listen reaches the cell with the client's own token
// (its etcd password) as its Authorization, never the proxy's.
func TestEtcdGatewayForwardsTheCallersToken(t *testing.T) {
	fc, p := startOnFake(t, Config{EtcdListen: "127.0.0.1:0", EtcdDefaultPrefix: "/demo/etcd"})
	if p.EtcdAddr() == "" {
		t.Fatal("no etcd address")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.EtcdAddr()}, DialTimeout: 5 * time.Second,
		Username: "anyone", Password: "tenant-a", Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/demo/x", "v"); err != nil {
		t.Fatalf("put through the gateway: %v", err)
	}
	puts := fc.Requests(api.RoutePut)
	if len(puts) == 0 || puts[len(puts)-1].Auth != "Bearer tenant-a" {
		t.Fatalf("the cell got %+v, want the caller's Authorization", puts)
	}
	if n, ok := fc.Node("/demo/x"); !ok || string(n.Value) != "v" {
		t.Fatalf("node %+v %v", n, ok)
	}
}

// TestEtcdGatewayClosesCleanly: a proxy serving etcd closes without error.
func TestEtcdGatewayClosesCleanly(t *testing.T) {
	_, p := startOnFake(t, Config{EtcdListen: "127.0.0.1:0"})
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}
