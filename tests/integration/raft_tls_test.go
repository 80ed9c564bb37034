package integration_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/lockservice/lockd/sdk"
	"github.com/lockservice/lockd/tests/cluster"
)

// raftProbeWait is how long an accepted Raft connection is watched for
// the server's refusal after the handshake: with TLS 1.3 the server
// verifies the client's certificate after the client's side of the
// handshake is done, and its alert arrives on the first read. A Raft
// port that took the certificate says nothing (it waits for a message),
// and the read times out.
const raftProbeWait = 2 * time.Second

const raftTLSAdminToken = "admin-token-of-the-raft-tls-test"

// TestRaftPortTakesOnlyRaftCerts (issue 22, hole 2): the Raft port runs
// mutual TLS on a CA of its own, so that only lockds speak Raft. Each
// lockd's Raft port is dialled with the application's client certificate
// (it must be refused), with no certificate (refused), with the API
// certificate lockds and lockproxies present to the API (refused), and
// with a lockd's Raft certificate (taken). The cluster works over TLS
// meanwhile. The mutant lockd_broken_raftca (Raft on the API's CA,
// as before) fails on the application certificate.
func TestRaftPortTakesOnlyRaftCerts(t *testing.T) {
	t.Parallel()
	c := cluster.Start(t, cluster.Options{Replicas: 3, TLS: true, AdminToken: raftTLSAdminToken})
	ctx, cancel := ctxFor(2 * time.Minute)
	defer cancel()
	client, raft := c.ClientTLS(), c.RaftTLS()
	good, err := client.Client()
	must(t, err)
	cl, err := sdk.New(ctx, sdk.Config{Endpoints: c.Endpoints(), TLS: good, AuthToken: raftTLSAdminToken, Direct: true})
	must(t, err)
	defer cl.Close()
	_, err = cl.Put(ctx, "/demo/raft-tls", []byte("v"))
	must(t, err)
	if n, err := cl.Get(ctx, "/demo/raft-tls"); err != nil || string(n.Value) != "v" {
		t.Fatalf("get over TLS: %v %v", n, err)
	}

	// The dialler trusts both CAs: whichever the server presents, a
	// refusal is the server's refusal of the client's certificate.
	both := x509.NewCertPool()
	for _, ca := range []string{client.CA, raft.CA} {
		b, err := os.ReadFile(ca)
		must(t, err)
		both.AppendCertsFromPEM(b)
	}
	node := c.NodeTLS()
	for _, k := range []struct {
		name  string
		files *[2]string // certificate and key presented; nil: none
		roots *x509.CertPool
		taken bool
	}{
		{"application client certificate", &[2]string{client.Cert, client.Key}, both, false},
		{"no certificate", nil, both, false},
		{"API node certificate (lockproxies hold it)", &[2]string{node.Cert, node.Key}, both, false},
		{"a lockd's Raft certificate", &[2]string{raft.Cert, raft.Key}, caPool(t, raft.CA), true},
	} {
		t.Run(k.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: k.roots, MinVersion: tls.VersionTLS12}
			if k.files != nil {
				cert, err := tls.LoadX509KeyPair(k.files[0], k.files[1])
				must(t, err)
				// Presented whatever CAs the server names as acceptable
				// (with Certificates, Go would hold back a certificate
				// of a CA the server does not name): an attacker does.
				cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
			}
			for _, id := range c.IDs() {
				addr := c.Node(id).RaftAddr
				taken, why := probeRaft(addr, cfg)
				t.Logf("lockd %d Raft %s: taken=%v (%s)", id, addr, taken, why)
				if taken != k.taken {
					t.Errorf("the Raft port of lockd %d (%s), %s: taken=%v (%s), want taken=%v", id, addr, k.name, taken, why, k.taken)
				}
			}
		})
	}

	// Raft still carries the cluster: a write after the probes commits.
	_, err = cl.Put(ctx, "/demo/raft-tls", []byte("w"))
	must(t, err)
}

// probeRaft dials a Raft port over TLS and reports whether the server
// took the connection: the handshake succeeded and the server did not
// refuse on the first read within raftProbeWait (it waits for a Raft
// message). why says what was seen.
func probeRaft(addr string, cfg *tls.Config) (bool, string) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return false, "handshake: " + err.Error()
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(raftProbeWait)); err != nil {
		return false, err.Error()
	}
	var b [1]byte
	_, err = conn.Read(b[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true, "handshake done; the server waits for a message"
	}
	if err == nil {
		return true, "handshake done; the server wrote"
	}
	return false, "first read: " + err.Error()
}

func caPool(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("%s: no certificate", path)
	}
	return pool
}
