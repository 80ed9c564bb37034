// Package tlsutil loads the TLS configurations lockd, lockproxy, the SDK
// and lockctl use, and makes a development CA with certificates for a
// local cluster (lockd certs). Every connection is mutual: a server asks
// for and verifies the client's certificate against the cluster's CA, and
// a client verifies the server's.
package tlsutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files names a certificate, its key and the CA that signs the peers'.
type Files struct {
	Cert, Key, CA string
}

// Set reports whether any file is named; Check that all three are.
func (f Files) Set() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Check reports a partial set.
func (f Files) Check() error {
	if f.Set() && (f.Cert == "" || f.Key == "" || f.CA == "") {
		return errors.New("TLS needs a certificate, its key and the CA (--tls-cert, --tls-key, --tls-ca)")
	}
	return nil
}

func (f Files) load() (tls.Certificate, *x509.CertPool, error) {
	if err := f.Check(); err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("TLS certificate %s: %w", f.Cert, err)
	}
	pool, err := LoadCA(f.CA)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return cert, pool, nil
}

// LoadCA reads a PEM file of CA certificates.
func LoadCA(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// Server is the configuration of a listener that verifies a client
// certificate against the CA when one is given. The API requires one on
// every route but /healthz and /metrics (RequireClientCert), so that
// probes and scrapers need no certificate; dragonboat's Raft transport
// has its own configuration, which requires one.
func (f Files) Server() (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.VerifyClientCertIfGiven,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// Client is the configuration of a client that presents its certificate
// and verifies the server's against the CA.
func (f Files) Client() (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// HasClientCert reports whether a connection's TLS state carries a
// verified client certificate (nil: not TLS).
func HasClientCert(st *tls.ConnectionState) bool {
	return st != nil && len(st.VerifiedChains) > 0
}

// DevCA writes, into dir, a development CA (ca.pem, ca-key.pem) and two
// certificates it signs, valid for hosts (IP addresses or names) for a
// year: node.pem / node-key.pem for lockds and lockproxies (server and
// client use: replicas dial each other) and client.pem / client-key.pem
// for lockctl and applications. Existing files are kept: a cluster's
// certificates survive restarts.
func DevCA(dir string, hosts []string) (Files, Files, error) {
	node := Files{Cert: filepath.Join(dir, "node.pem"), Key: filepath.Join(dir, "node-key.pem"), CA: filepath.Join(dir, "ca.pem")}
	client := Files{Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem"), CA: node.CA}
	if exists(node.Cert) && exists(node.Key) && exists(client.Cert) && exists(client.Key) && exists(node.CA) {
		return node, client, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return node, client, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return node, client, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "lockd development CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return node, client, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return node, client, err
	}
	if err := writePEM(node.CA, "CERTIFICATE", caDER, 0o644); err != nil {
		return node, client, err
	}
	if err := writeKey(filepath.Join(dir, "ca-key.pem"), caKey); err != nil {
		return node, client, err
	}
	leaf := func(f Files, cn string, usage []x509.ExtKeyUsage, hosts []string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(365 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usage,
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writePEM(f.Cert, "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
		return writeKey(f.Key, key)
	}
	if err := leaf(node, "lockd node", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, hosts); err != nil {
		return node, client, err
	}
	if err := leaf(client, "lockd client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil); err != nil {
		return node, client, err
	}
	return node, client, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(fmt.Sprintf("tlsutil: no randomness: %v", err))
	}
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
