// Package tlsutil loads the TLS configurations lockd, lockproxy, the SDK
// and lockctl use, and makes a development CA with certificates for a
// local cluster (lockd certs). Every connection is mutual: a server asks
// for and verifies the client's certificate against the cluster's CA, and
// a client verifies the server's. The API and Raft have CAs of their own
// (DevCA, DevRaftCA; DistinctCAs checks it): the client certificates the
// API's CA signs for applications never open a Raft port.
package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
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
