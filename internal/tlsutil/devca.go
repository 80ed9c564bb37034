package tlsutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// devValidity is how long a development certificate is valid.
const devValidity = 365 * 24 * time.Hour

// The usages of a development leaf certificate: a node's (lockd,
// lockproxy, a lockd's Raft certificate) serves and dials, a client's
// only dials.
var (
	nodeUsage   = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	clientUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
)

// DevCA writes, into dir, a development CA (ca.pem, ca-key.pem) and two
// certificates it signs, valid for hosts (IP addresses or names) for a
// year: node.pem / node-key.pem for lockds and lockproxies (server and
// client use: replicas dial each other) and client.pem / client-key.pem
// for lockctl and applications. This is the API's CA only: the Raft port
// takes the certificates of another CA (DevRaftCA). Existing files are
// kept: a cluster's certificates survive restarts.
func DevCA(dir string, hosts []string) (Files, Files, error) {
	node := Files{Cert: filepath.Join(dir, "node.pem"), Key: filepath.Join(dir, "node-key.pem"), CA: filepath.Join(dir, "ca.pem")}
	client := Files{Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem"), CA: node.CA}
	if exists(node.Cert) && exists(node.Key) && exists(client.Cert) && exists(client.Key) && exists(node.CA) {
		return node, client, nil
	}
	ca, err := newDevCA(dir, node.CA, filepath.Join(dir, "ca-key.pem"), "lockd development CA")
	if err != nil {
		return node, client, err
	}
	if err := ca.sign(node, "lockd node", nodeUsage, hosts); err != nil {
		return node, client, err
	}
	if err := ca.sign(client, "lockd client", clientUsage, nil); err != nil {
		return node, client, err
	}
	return node, client, nil
}

// DevRaftCA writes, into dir, the development Raft CA (raft-ca.pem,
// raft-ca-key.pem), a CA of its own that signs nothing but the lockds'
// Raft certificates, and one such certificate, raft.pem / raft-key.pem
// (server and client use, valid for hosts for a year). Only lockds may
// hold it: the application certificates DevCA makes are not signed by
// this CA, so they cannot complete a handshake with a Raft port.
// Existing files are kept.
func DevRaftCA(dir string, hosts []string) (Files, error) {
	raft := RaftFiles(dir, "")
	if exists(raft.Cert) && exists(raft.Key) && exists(raft.CA) {
		return raft, nil
	}
	caKey := filepath.Join(dir, "raft-ca-key.pem")
	var ca devCA
	var err error
	if exists(raft.CA) && exists(caKey) {
		ca, err = loadDevCA(raft.CA, caKey) // keep the CA other lockds' certificates chain to
	} else {
		ca, err = newDevCA(dir, raft.CA, caKey, "lockd development Raft CA")
	}
	if err != nil {
		return raft, err
	}
	return raft, ca.sign(raft, "lockd raft", nodeUsage, hosts)
}

// RaftFiles names the Raft files in dir: raft.pem and raft-key.pem (name
// ""), or raft-NAME.pem and raft-NAME-key.pem, with raft-ca.pem.
func RaftFiles(dir, name string) Files {
	base := "raft"
	if name != "" {
		base += "-" + name
	}
	return Files{Cert: filepath.Join(dir, base+".pem"), Key: filepath.Join(dir, base+"-key.pem"), CA: filepath.Join(dir, "raft-ca.pem")}
}

// DevRaftCert signs one more Raft certificate with the Raft CA in dir
// (DevRaftCA made it): raft-NAME.pem / raft-NAME-key.pem, valid for
// hosts, for a lockd of its own. An existing pair is kept.
func DevRaftCert(dir, name string, hosts []string) (Files, error) {
	f := RaftFiles(dir, name)
	if name == "" {
		return f, errors.New("a Raft certificate needs a name")
	}
	if exists(f.Cert) && exists(f.Key) {
		return f, nil
	}
	ca, err := loadDevCA(f.CA, filepath.Join(dir, "raft-ca-key.pem"))
	if err != nil {
		return f, err
	}
	return f, ca.sign(f, "lockd raft "+name, nodeUsage, hosts)
}

// devCA is a development CA's certificate and key.
type devCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// newDevCA makes a CA and writes its certificate and key.
func newDevCA(dir, certPath, keyPath, cn string) (devCA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return devCA{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return devCA{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(devValidity),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return devCA{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return devCA{}, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return devCA{}, err
	}
	return devCA{cert: cert, key: key}, writeKey(keyPath, key)
}

// loadDevCA reads a CA newDevCA wrote.
func loadDevCA(certPath, keyPath string) (devCA, error) {
	cb, err := os.ReadFile(certPath)
	if err != nil {
		return devCA{}, err
	}
	kb, err := os.ReadFile(keyPath)
	if err != nil {
		return devCA{}, err
	}
	cblock, _ := pem.Decode(cb)
	kblock, _ := pem.Decode(kb)
	if cblock == nil || kblock == nil {
		return devCA{}, fmt.Errorf("%s or %s: no PEM block", certPath, keyPath)
	}
	cert, err := x509.ParseCertificate(cblock.Bytes)
	if err != nil {
		return devCA{}, fmt.Errorf("%s: %w", certPath, err)
	}
	key, err := x509.ParseECPrivateKey(kblock.Bytes)
	if err != nil {
		return devCA{}, fmt.Errorf("%s: %w", keyPath, err)
	}
	return devCA{cert: cert, key: key}, nil
}

// sign writes a leaf certificate (f.Cert) and its key (f.Key) the CA
// signs, valid for hosts (IP addresses or names).
func (ca devCA) sign(f Files, cn string, usage []x509.ExtKeyUsage, hosts []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(devValidity),
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return err
	}
	if err := writePEM(f.Cert, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writeKey(f.Key, key)
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
