package etcdgw

import (
	"context"

	"github.com/lockservice/lockd/api"
)

// Backend is what the gateway needs from the lockproxy it runs in. The
// gateway is a client of its own proxy: every request an etcd client
// makes becomes API requests sent through the proxy's own handler with
// the etcd client's token, so the proxy and the lockds authorize them
// exactly as they would an SDK client's (grants, quotas, session
// secrets), and KeepAlives of leases go through the proxy's batches.
// package proxy implements it (proxy/proxy_etcd.go).
type Backend interface {
	// Call sends one API request (route, a JSON-encodable request) as a
	// client holding token would send it to this proxy ("" sends no
	// token), and decodes the answer into resp. A refusal comes back as
	// an *api.Error (errors.As) with its stable code; a failure whose
	// outcome is unknown (a write that may or may not have applied) as
	// an error that is not an *api.Error with a known-not-applied code.
	Call(ctx context.Context, token, route string, req, resp any) error
	// CallOwn sends a request with the proxy's own credentials: only for
	// reads the gateway itself filters by the caller's grants (the change
	// feed), never on behalf of a caller's write.
	CallOwn(ctx context.Context, route string, req, resp any) error
	// Authorize authenticates token as the proxy authenticates its own
	// clients: an unknown or revoked token is an *api.Error unauthorized.
	Authorize(ctx context.Context, token string) (Caller, error)
	// Prefix is the served top-level prefix of path, its cell and the
	// prefix's directory epoch, from the proxy's view of the directory.
	Prefix(path string) (prefix PrefixInfo, ok bool)
	// Prefixes are every served top-level prefix (for error messages).
	Prefixes() []string
	// Proxies are the lockproxies registered in the directory.
	Proxies() []api.ProxyInfo
	// PeerEtcdURL is where proxy p's etcd gateway serves clients
	// ("https://host:port"; "" if it serves none), from its status.
	PeerEtcdURL(ctx context.Context, p api.ProxyInfo) (string, error)
	// Name is this lockproxy's name in the directory.
	Name() string
}

// PrefixInfo is a served top-level prefix.
type PrefixInfo struct {
	Prefix string // "/demo"
	Cell   string
	Epoch  uint64 // the prefix's directory epoch: the high bits of its revisions
}

// Caller is who sent a request: an authenticated token (or anyone, with
// auth off).
type Caller interface {
	// Tenant is the caller's tenant ("" with auth off or for the proxy's
	// own token).
	Tenant() string
	// Digest identifies the credential (api.TokenDigest of the token; ""
	// with auth off): leases are bound to it.
	Digest() string
	// Allows reports whether the caller holds role on path.
	Allows(role api.Role, path string) bool
}
