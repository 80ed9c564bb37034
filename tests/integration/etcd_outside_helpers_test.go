package integration_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/tlsutil"
	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// Helpers of the tests that run what others wrote (etcdctl, etcd's
// concurrency package) against the etcd gateway (lockproxy --etcd-listen):
// etcdctl_test.go and etcd_concurrency_test.go.

// etcdTenantToken is the admin token of the clusters that require tokens.
const etcdAdminToken = "admin-token-of-the-etcd-outside-tests"

// etcdDialTimeout bounds a client's first connection to the gateway.
const etcdDialTimeout = 10 * time.Second

// etcdSetupTimeout bounds a mode's setup: tenant, first answers.
const etcdSetupTimeout = 2 * time.Minute

// etcdCells are lockd dev's cells with the gateway's default prefix
// /etcd served by demo's cell: etcd keys without a leading "/" ("foo",
// "accts/1") live there.
var etcdCells = []cluster.CellSpec{
	{Name: "demo", ShardID: 1, Prefixes: []string{"/demo", "/etcd"}},
	{Name: "payments", ShardID: 2, Prefixes: []string{"/payments"}},
}

// etcdMode is how clients reach the gateway: plainly, with an API token
// required (etcd's --user NAME:TOKEN), or over mutual TLS.
type etcdMode string

const (
	etcdPlain  etcdMode = "plain"
	etcdTokens etcdMode = "tokens"
	etcdMTLS   etcdMode = "mtls"
)

// etcdModes are every mode, in the order the tests run them.
var etcdModes = []etcdMode{etcdPlain, etcdTokens, etcdMTLS}

// etcdGW is a cluster, a lockproxy serving etcd, and how to reach it.
type etcdGW struct {
	c     *cluster.Cluster
	p     *cluster.Proxy
	mode  etcdMode
	addr  string        // the gateway's host:port
	token string        // the tenant's API token (tokens mode)
	tls   tlsutil.Files // the client certificate (mtls mode)
}

// startEtcdGW starts three lockds and a lockproxy with --etcd-listen in
// mode; with tokens, a tenant "etcd" granted read, write and lock on
// /demo and /etcd, whose token the clients send.
func startEtcdGW(t *testing.T, mode etcdMode) *etcdGW {
	t.Helper()
	opts := cluster.Options{Replicas: 3, Cells: etcdCells}
	switch mode {
	case etcdTokens:
		opts.AdminToken = etcdAdminToken
	case etcdMTLS:
		opts.TLS = true
	}
	c := cluster.Start(t, opts)
	p, err := c.StartProxy("etcd-gw")
	must(t, err)
	g := &etcdGW{c: c, p: p, mode: mode, addr: p.EtcdAddr}
	if g.addr == "" {
		t.Fatalf("lockproxy %s serves no etcd address", p.Name)
	}
	if mode == etcdMTLS {
		g.tls = c.ClientTLS()
	}
	if mode == etcdTokens {
		g.token = etcdTenant(t, c)
	}
	return g
}

// etcdTenant makes the tenant the etcd clients act as and returns its token.
func etcdTenant(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	ctx, cancel := ctxFor(etcdSetupTimeout)
	defer cancel()
	adm, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), AuthToken: etcdAdminToken, Direct: true})
	must(t, err)
	defer adm.Close()
	roles := []api.Role{api.RoleRead, api.RoleWrite, api.RoleLock}
	tn := api.Tenant{Name: "etcd", Grants: []api.Grant{{Prefix: "/demo", Roles: roles}, {Prefix: "/etcd", Roles: roles}}}
	var resp api.TenantResponse
	// The directory group bootstraps just after the cells lead: a refusal
	// before that ("not bootstrapped") applied nothing.
	for attempt := 0; ; attempt++ {
		resp, err = adm.PutTenant(ctx, tn, true)
		if api.CodeOf(err) != api.CodeUnavailable || attempt == 100 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	must(t, err)
	if resp.Token == "" {
		t.Fatal("tenant etcd: no token")
	}
	return resp.Token
}

// client is etcd's Go client on the gateway, as this mode's clients connect.
func (g *etcdGW) client(t testing.TB) *clientv3.Client {
	t.Helper()
	return g.clientOf(t, g.addr)
}

// clientOf is an etcd client of the gateways at endpoints, in this mode.
func (g *etcdGW) clientOf(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: etcdDialTimeout,
		//lint:ignore SA1019 clientv3 still dials with grpc.Dial: fail here, not in the first call
		DialOptions: []grpc.DialOption{grpc.WithBlock()},
	}
	switch g.mode {
	case etcdTokens:
		cfg.Username, cfg.Password = "etcd", g.token
	case etcdMTLS:
		tc, err := g.tls.Client()
		must(t, err)
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("etcd client on %v (%s): %v", endpoints, g.mode, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// ctlFlags are etcdctl's connection flags in this mode.
func (g *etcdGW) ctlFlags() []string {
	f := []string{"--endpoints=" + g.addr, "--dial-timeout=10s", "--command-timeout=30s"}
	switch g.mode {
	case etcdTokens:
		f = append(f, "--user=etcd:"+g.token)
	case etcdMTLS:
		f = append(f, "--cacert="+g.tls.CA, "--cert="+g.tls.Cert, "--key="+g.tls.Key)
	}
	return f
}

// etcdctlBuilds are the two etcdctl builds, each nil with the reason it is
// missing (a subtest skips naming it; with LOCKD_REQUIRE_ETCD set, as CI
// sets it, it fails instead).
func etcdctlBuilds() []etcdctlBuild {
	var out []etcdctlBuild
	deb, err := cluster.EtcdctlDebian()
	out = append(out, etcdctlBuild{name: "debian-3.4", bin: deb, err: err})
	mod, err := cluster.EtcdctlModule()
	out = append(out, etcdctlBuild{name: "module-" + cluster.EtcdctlModuleVersion, bin: mod, err: err})
	return out
}

type etcdctlBuild struct {
	name string
	bin  cluster.Etcdctl
	err  error
}

// need skips (or, under CI, fails) t when the build is missing.
func (b etcdctlBuild) need(t *testing.T) {
	t.Helper()
	if b.err == nil {
		return
	}
	if os.Getenv("LOCKD_REQUIRE_ETCD") != "" {
		t.Fatalf("LOCKD_REQUIRE_ETCD is set (CI) but etcdctl %s is missing: %v", b.name, b.err)
	}
	t.Skipf("etcdctl %s is missing: %v", b.name, b.err)
}

// keyBase is a key prefix of this build's own: "/demo/ctl-debian-3-4".
func (b etcdctlBuild) keyBase() string {
	return "/demo/ctl-" + strings.NewReplacer(".", "-", "/", "-").Replace(b.name)
}

// waitGateway waits until the gateway answers a read (the cells lead, the
// proxy knows the directory).
func (g *etcdGW) waitGateway(t testing.TB, cli *clientv3.Client) {
	t.Helper()
	ctx, cancel := ctxFor(etcdSetupTimeout)
	defer cancel()
	var err error
	for attempt := 0; attempt < 200; attempt++ {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = cli.Get(rctx, "/demo/etcd-gateway-ready")
		rcancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the gateway at %s never answered a read: %v", g.addr, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("the gateway at %s never answered a read: %v", g.addr, err)
}
