package cluster

import (
	"fmt"
	"net/http"

	"github.com/lockservice/lockd/internal/tlsutil"
)

// tlsArgs are a lockd's or lockproxy's TLS flags: the node certificate,
// or plain HTTP.
func (c *Cluster) tlsArgs() []string {
	if !c.opts.TLS {
		return []string{"--plain-http"}
	}
	f := c.opts.tlsNode
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}
}

// Scheme is the API's URL scheme: https with TLS.
func (c *Cluster) Scheme() string {
	if c.opts.TLS {
		return "https"
	}
	return "http"
}

// ClientTLS are the files of a client certificate the cluster's CA signed
// (with TLS on).
func (c *Cluster) ClientTLS() tlsutil.Files { return c.opts.tlsClient }

// NodeTLS are the files of the API certificate the lockds and lockproxies
// present (with TLS on).
func (c *Cluster) NodeTLS() tlsutil.Files { return c.opts.tlsNode }

// RaftTLS are the files of the lockds' Raft certificate and the Raft CA
// (with TLS on).
func (c *Cluster) RaftTLS() tlsutil.Files { return c.opts.tlsRaft }

// ServeArgs is replica id's lockd command line after "serve": the flags a
// command that must describe the same lockd (lockd restore) is given.
func (c *Cluster) ServeArgs(id int) []string { return c.args(id)[1:] }

// NewClient returns a test client over every endpoint.
func (c *Cluster) NewClient() *Client {
	cl := NewClient(c.Endpoints()...)
	cl.Token = c.opts.AdminToken
	if c.opts.TLS {
		tc, err := c.opts.tlsClient.Client()
		if err != nil {
			panic(fmt.Sprintf("testcluster: client certificate: %v", err)) // New loaded it already
		}
		cl.UseTLS(tc)
	}
	return cl
}

// withToken makes every harness request carry token (when auth is on).
func withToken(base http.RoundTripper, token string) http.RoundTripper {
	if token == "" {
		return base
	}
	return tokenTransport{base: base, token: token}
}

type tokenTransport struct {
	base  http.RoundTripper
	token string
}

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(r)
}
