package tlsutil

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// ErrSharedCA is the error of DistinctCAs: the Raft CA file holds a CA
// of the API (the same certificate, or one with the same key).
var ErrSharedCA = errors.New("the Raft CA is the API's CA")

// DistinctCAs checks that the Raft CA file (raftCA) shares no CA with the
// API's (apiCA): no certificate in one is in the other, and none has the
// other's public key (a CA re-issued with the same key signs the same
// certificates). Otherwise the Raft port takes every certificate the API
// CA signs, the applications' client certificates among them.
func DistinctCAs(apiCA, raftCA string) error {
	api, err := readCerts(apiCA)
	if err != nil {
		return err
	}
	raft, err := readCerts(raftCA)
	if err != nil {
		return err
	}
	for _, r := range raft {
		for _, a := range api {
			if bytes.Equal(r.Raw, a.Raw) || bytes.Equal(r.RawSubjectPublicKeyInfo, a.RawSubjectPublicKeyInfo) {
				return fmt.Errorf("%w: %s and %s both hold %q", ErrSharedCA, raftCA, apiCA, r.Subject.CommonName)
			}
		}
	}
	return nil
}

// readCerts parses every certificate of a PEM file.
func readCerts(path string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	var out []*x509.Certificate
	for len(b) > 0 { // each Decode consumes a block: bounded by the file
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("TLS CA %s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", path)
	}
	return out, nil
}
