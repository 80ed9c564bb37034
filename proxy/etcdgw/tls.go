package etcdgw

import (
	"crypto/tls"

	"github.com/lockservice/lockd/internal/mutant"
)

// Mutual TLS on the etcd port. The proxy's client listener verifies a
// certificate only if one is given (tls.VerifyClientCertIfGiven, so that
// /healthz and /metrics need none) and refuses a request without one in
// its handler; the gateway's requests reach that handler past the
// certificate check (proxy.handleInternal). So the etcd port itself must
// require a verified certificate: it serves no route that may go
// without one.

// requireClientCert is cfg with a verified client certificate required
// of every connection (a copy: the proxy's listener keeps its own).
func requireClientCert(cfg *tls.Config) *tls.Config {
	c := cfg.Clone()
	if !mutant.On(mutant.EtcdMTLS) {
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c
}
