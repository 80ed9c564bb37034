package tlsutil

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// leaf reads the first certificate of a PEM file.
func leaf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	cs, err := readCerts(path)
	if err != nil {
		t.Fatal(err)
	}
	return cs[0]
}

// TestDevCertsRaftCASeparate checks the development certificates: the
// Raft CA verifies the lockds' Raft certificates (as clients and as
// servers, for the hosts given) and nothing the API's CA signs, the
// application client certificate above all.
func TestDevCertsRaftCASeparate(t *testing.T) {
	dir := t.TempDir()
	hosts := []string{"127.0.0.1", "localhost"}
	node, client, err := DevCA(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	raft, err := DevRaftCA(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	other, err := DevRaftCert(dir, "lockd-4", []string{"10.0.0.4"})
	if err != nil {
		t.Fatal(err)
	}
	raftPool, err := LoadCA(raft.CA)
	if err != nil {
		t.Fatal(err)
	}
	apiPool, err := LoadCA(node.CA)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		name  string
		cert  string
		pool  *x509.CertPool
		usage x509.ExtKeyUsage
		host  string
		ok    bool
	}{
		{"application client cert as a Raft client", client.Cert, raftPool, x509.ExtKeyUsageClientAuth, "", false},
		{"API node cert as a Raft client", node.Cert, raftPool, x509.ExtKeyUsageClientAuth, "", false},
		{"API node cert as a Raft server", node.Cert, raftPool, x509.ExtKeyUsageServerAuth, "127.0.0.1", false},
		{"Raft cert as a Raft client", raft.Cert, raftPool, x509.ExtKeyUsageClientAuth, "", true},
		{"Raft cert as a Raft server", raft.Cert, raftPool, x509.ExtKeyUsageServerAuth, "127.0.0.1", true},
		{"Raft cert for another host", raft.Cert, raftPool, x509.ExtKeyUsageServerAuth, "10.0.0.4", false},
		{"named Raft cert as a Raft server", other.Cert, raftPool, x509.ExtKeyUsageServerAuth, "10.0.0.4", true},
		{"named Raft cert as a Raft client", other.Cert, raftPool, x509.ExtKeyUsageClientAuth, "", true},
		{"Raft cert as an API client", raft.Cert, apiPool, x509.ExtKeyUsageClientAuth, "", false},
		{"application client cert as an API client", client.Cert, apiPool, x509.ExtKeyUsageClientAuth, "", true},
	} {
		t.Run(k.name, func(t *testing.T) {
			_, err := leaf(t, k.cert).Verify(x509.VerifyOptions{Roots: k.pool, KeyUsages: []x509.ExtKeyUsage{k.usage}, DNSName: k.host})
			if (err == nil) != k.ok {
				t.Fatalf("verify: %v, want ok=%v", err, k.ok)
			}
		})
	}
	if raft.CA == node.CA {
		t.Fatalf("one CA file for the API and Raft: %s", raft.CA)
	}
	for _, f := range []Files{raft, other} {
		if _, err := tls.LoadX509KeyPair(f.Cert, f.Key); err != nil {
			t.Fatalf("%s: %v", f.Cert, err)
		}
	}
}

// TestDevRaftCAKept checks that existing files are kept, and that a Raft
// certificate made again (raft.pem removed) chains to the same CA.
func TestDevRaftCAKept(t *testing.T) {
	dir := t.TempDir()
	hosts := []string{"127.0.0.1"}
	first, err := DevRaftCA(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	ca := leaf(t, first.CA)
	again, err := DevRaftCA(dir, hosts)
	if err != nil || !leaf(t, again.Cert).Equal(leaf(t, first.Cert)) {
		t.Fatalf("a second DevRaftCA made a new certificate (%v)", err)
	}
	if err := os.Remove(first.Cert); err != nil {
		t.Fatal(err)
	}
	remade, err := DevRaftCA(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	if !leaf(t, remade.CA).Equal(ca) {
		t.Fatal("the Raft CA was replaced")
	}
	if _, err := DevRaftCert(dir, "", hosts); err == nil {
		t.Fatal("a named Raft certificate without a name")
	}
}

// TestDistinctCAs: the Raft CA file must share no CA with the API's,
// byte for byte, in a bundle, or by key.
func TestDistinctCAs(t *testing.T) {
	dir := t.TempDir()
	node, _, err := DevCA(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	raft, err := DevRaftCA(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	apiPEM, _ := os.ReadFile(node.CA)
	raftPEM, _ := os.ReadFile(raft.CA)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, k := range []struct {
		name   string
		raftCA string
		shared bool
	}{
		{"separate CAs", raft.CA, false},
		{"the API CA file itself", node.CA, true},
		{"a copy of the API CA", write("copy.pem", apiPEM), true},
		{"a bundle holding the API CA", write("bundle.pem", append(append([]byte{}, raftPEM...), apiPEM...)), true},
		{"the API CA re-issued with its key", reissue(t, dir, node.CA), true},
	} {
		t.Run(k.name, func(t *testing.T) {
			err := DistinctCAs(node.CA, k.raftCA)
			if errors.Is(err, ErrSharedCA) != k.shared {
				t.Fatalf("DistinctCAs: %v, want shared=%v", err, k.shared)
			}
		})
	}
	if err := DistinctCAs(node.CA, write("empty.pem", []byte("no pem"))); err == nil || errors.Is(err, ErrSharedCA) {
		t.Fatalf("a CA file without certificates: %v", err)
	}
}

// reissue writes a new self-signed certificate with the key of the CA in
// caPath (ca-key.pem beside it): another certificate, the same CA.
func reissue(t *testing.T, dir, caPath string) string {
	t.Helper()
	ca, err := loadDevCA(caPath, filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := *ca.cert
	tmpl.SerialNumber = serial()
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "reissued.pem")
	if err := writePEM(p, "CERTIFICATE", der, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
