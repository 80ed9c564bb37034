package integration_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/ctl"
	"github.com/lockservice/lockd/internal/tlsutil"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// TestMutualTLS runs three real lockds and a lockproxy with mutual TLS on
// a development CA (lockd certs): Raft between the replicas, and the API.
// A client with the CA's certificate works (SDK, lockctl, through the
// proxy); one without a certificate, one whose certificate another CA
// signed, and one speaking plain HTTP are refused; /healthz answers
// without a certificate (probes, scrapers).
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{Replicas: 3, TLS: true})
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	files := c.ClientTLS()
	good, err := files.Client()
	must(t, err)

	cl, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), TLS: good, Direct: true})
	must(t, err)
	defer cl.Close()
	_, err = cl.Put(ctx, "/demo/tls", []byte("v"))
	must(t, err)
	m := cl.NewMutex("/demo/tls-lock")
	must(t, m.Lock(ctx))
	must(t, m.Unlock(ctx))

	var out bytes.Buffer
	err = ctl.Execute(ctx, []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--direct",
		"--tls-cert", files.Cert, "--tls-key", files.Key, "--tls-ca", files.CA, "get", "/demo/tls"}, &out, io.Discard)
	if err != nil || !strings.HasPrefix(out.String(), "v\n") {
		t.Fatalf("lockctl get over TLS: %q, %v", out.String(), err)
	}
	// The cluster's health (the status page's source) over mutual TLS.
	out.Reset()
	err = ctl.Execute(ctx, []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--direct",
		"--tls-cert", files.Cert, "--tls-key", files.Key, "--tls-ca", files.CA, "status", "-o", "json"}, &out, io.Discard)
	var rep struct {
		Health *api.ClusterHealth `json:"health"`
	}
	if err != nil || json.Unmarshal(out.Bytes(), &rep) != nil || rep.Health == nil || len(rep.Health.Cells) == 0 {
		t.Fatalf("lockctl status over TLS: %q, %v", out.String(), err)
	}

	pool, err := tlsutil.LoadCA(files.CA)
	must(t, err)
	_, foreign, err := tlsutil.DevCA(t.TempDir(), []string{"127.0.0.1"})
	must(t, err)
	foreignCfg, err := foreign.Client()
	must(t, err)
	foreignCfg.RootCAs = pool // it trusts the cluster; the cluster does not trust it
	for _, k := range []struct {
		name string
		tls  *tls.Config
		code api.Code
	}{
		{"no client certificate", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, api.CodeUnauthorized},
		{"another CA's certificate", foreignCfg, api.CodeUnavailable},
		{"plain HTTP", nil, api.CodeUnavailable},
	} {
		t.Run(k.name, func(t *testing.T) {
			sctx, scancel := ctxFor(3 * time.Second)
			defer scancel()
			bad, err := sdk.New(sctx, sdk.Config{Endpoints: c.Endpoints(), TLS: k.tls, Direct: true, RequestTimeout: time.Second})
			if err == nil {
				_, err = bad.Get(sctx, "/demo/tls")
				bad.Close()
			}
			if err == nil || api.CodeOf(err) != k.code {
				t.Fatalf("got %v, want %s", err, k.code)
			}
			t.Logf("refused: %v", err)
		})
	}

	// Probes need no certificate.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, Timeout: 5 * time.Second}
	resp, err := hc.Get("https://" + c.Endpoints()[0] + api.RouteHealth)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz over TLS without a certificate: HTTP %d", resp.StatusCode)
	}

	// Raft runs mutual TLS: dragonboat warns when it does not.
	for id := 1; id <= 3; id++ {
		if tail := c.LogTail(id, 200); strings.Contains(tail, "mutual TLS disabled") {
			t.Fatalf("replica %d runs Raft without TLS:\n%s", id, tail)
		}
	}

	// A lockproxy over TLS, both sides.
	p, err := c.StartProxy("tls-proxy")
	must(t, err)
	pc, err := sdk.New(ctx, sdk.Config{Endpoints: []string{p.Addr}, TLS: good})
	must(t, err)
	defer pc.Close()
	n, err := pc.Get(ctx, "/demo/tls")
	if err != nil || string(n.Value) != "v" {
		t.Fatalf("get through the TLS proxy: %v %v", n, err)
	}
	pm := pc.NewMutex("/demo/tls-lock")
	must(t, pm.Lock(ctx))
	must(t, pm.Unlock(ctx))
	sctx, scancel := ctxFor(3 * time.Second)
	defer scancel()
	bad, err := sdk.New(sctx, sdk.Config{Endpoints: []string{p.Addr}, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, RequestTimeout: time.Second})
	if err == nil {
		_, err = bad.Get(sctx, "/demo/tls")
		bad.Close()
	}
	if !errors.Is(err, sdk.ErrUnauthorized) && api.CodeOf(err) != api.CodeUnauthorized {
		t.Fatalf("the proxy took a client without a certificate: %v", err)
	}
}
