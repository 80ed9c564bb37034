package lockd

import (
	"strings"
	"testing"

	"github.com/lockservice/lockd/internal/tlsutil"
)

// TestValidateRaftTLS: with the API's TLS files, a lockd needs Raft's,
// on a CA of its own; --plain-http takes no TLS file at all.
func TestValidateRaftTLS(t *testing.T) {
	dir := t.TempDir()
	node, _, err := tlsutil.DevCA(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	raft, err := tlsutil.DevRaftCA(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	base := Config{ReplicaID: 1, DataDir: dir, Peers: []Peer{{1, "a:1", "a:2"}, {2, "b:1", "b:2"}, {3, "c:1", "c:2"}}}.withDefaults()
	with := func(api, rft tlsutil.Files, plain bool) Config {
		c := base
		c.TLSCert, c.TLSKey, c.TLSCA = api.Cert, api.Key, api.CA
		c.RaftTLSCert, c.RaftTLSKey, c.RaftTLSCA = rft.Cert, rft.Key, rft.CA
		c.PlainHTTP = plain
		return c
	}
	sameCA := raft
	sameCA.CA = node.CA
	partial := raft
	partial.Key = ""
	for _, k := range []struct {
		name string
		cfg  Config
		want string // "" ok, else part of the error
	}{
		{"API and Raft TLS on two CAs", with(node, raft, false), ""},
		{"plain HTTP", with(tlsutil.Files{}, tlsutil.Files{}, true), ""},
		{"API TLS without Raft's", with(node, tlsutil.Files{}, false), "Raft has no TLS files"},
		{"Raft on the API's CA", with(node, sameCA, false), "CA of its own"},
		{"Raft TLS without its key", with(node, partial, false), "--raft-tls-key"},
		{"Raft TLS without the API's", with(tlsutil.Files{}, raft, false), "no TLS"},
		{"plain HTTP with Raft files", with(tlsutil.Files{}, raft, true), "--plain-http and TLS files"},
		{"nothing", with(tlsutil.Files{}, tlsutil.Files{}, false), "no TLS"},
	} {
		t.Run(k.name, func(t *testing.T) {
			err := k.cfg.Validate()
			if k.want == "" && err != nil || k.want != "" && (err == nil || !strings.Contains(err.Error(), k.want)) {
				t.Fatalf("Validate: %v, want %q", err, k.want)
			}
		})
	}
	if nhc := nodeHostConfig(with(node, raft, false)); !nhc.MutualTLS || nhc.CAFile != raft.CA || nhc.CertFile != raft.Cert || nhc.KeyFile != raft.Key {
		t.Fatalf("the NodeHost runs Raft on %s, %s, %s (mutual %v), want the Raft files", nhc.CAFile, nhc.CertFile, nhc.KeyFile, nhc.MutualTLS)
	}
}

// TestExampleConfigRaftTLS: the example JSON config names the Raft files
// (raft_tls_*) beside the API's, on two CA files.
func TestExampleConfigRaftTLS(t *testing.T) {
	c, err := LoadConfig("../../deploy/lockd.example.json")
	if err != nil {
		t.Fatal(err)
	}
	if !c.TLSFiles().Set() || !c.RaftTLSFiles().Set() || c.RaftTLSCA == c.TLSCA {
		t.Fatalf("example config: API TLS %+v, Raft TLS %+v: want both, on two CAs", c.TLSFiles(), c.RaftTLSFiles())
	}
}
