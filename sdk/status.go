package sdk

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"

	"github.com/lockservice/lockd/api"
)

// FetchStatus asks the lockd process at endpoint for its status
// (GET /v1/status). It makes one attempt, bounded by ctx (or
// DefaultRequestTimeout), with no retries or redirects: it is a probe of
// that one process.
func FetchStatus(ctx context.Context, endpoint string, a Access) (api.StatusResponse, error) {
	var out api.StatusResponse
	return out, probe(ctx, endpoint, a, api.RouteStatus, &out)
}

// FetchHealth asks the lockd at endpoint to assess the cluster (GET
// /v1/status/health: every cell's level and the reasons, moves, proxies,
// lockds, tenants; an admin's view), like FetchStatus.
func FetchHealth(ctx context.Context, endpoint string, a Access) (api.ClusterHealth, error) {
	var out api.ClusterHealth
	return out, probe(ctx, endpoint, a, api.RouteStatusHealth, &out)
}

// Access is what a probe presents: a token (may be empty) and, against a
// cluster running TLS, the client's TLS configuration.
type Access struct {
	AuthToken string
	TLS       *tls.Config
}

// FetchProxyStatus asks the lockproxy at endpoint for its status (its
// clients, the sessions it renews per cell), like FetchStatus.
func FetchProxyStatus(ctx context.Context, endpoint string, a Access) (api.ProxyStatus, error) {
	var out api.ProxyStatus
	return out, probe(ctx, endpoint, a, api.RouteStatus, &out)
}

// FetchDirectory reads the directory from the lockd or lockproxy at
// endpoint, like FetchStatus.
func FetchDirectory(ctx context.Context, endpoint string, a Access) (api.DirectoryResponse, error) {
	var out api.DirectoryResponse
	return out, probe(ctx, endpoint, a, api.RouteDirectory, &out)
}

// probe is one GET of route on endpoint, decoded into out.
func probe(ctx context.Context, endpoint string, a Access, route string, out any) error {
	t := newTransport("status", a.AuthToken, 1, a.TLS, nil)
	defer t.close()
	status, body, _, err := t.roundTrip(ctx, exchange{method: http.MethodGet, addr: endpoint, path: route, timeout: DefaultRequestTimeout})
	if err != nil {
		return api.Errorf(api.CodeUnavailable, "%s: %v", endpoint, err)
	}
	if status < 200 || status >= 300 {
		return decodeError(status, body, endpoint)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return api.Errorf(api.CodeInternal, "decode %s from %s: %v", route, endpoint, err)
	}
	return nil
}
