package sdk

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/lockservice/lockd/api"
)

// FetchStatus asks the lockd process at endpoint for its status
// (GET /v1/status). It makes one attempt, bounded by ctx (or
// DefaultRequestTimeout), with no retries or redirects: it is a probe of
// that one process. authToken may be empty.
func FetchStatus(ctx context.Context, endpoint, authToken string) (api.StatusResponse, error) {
	var out api.StatusResponse
	return out, probe(ctx, endpoint, authToken, api.RouteStatus, &out)
}

// FetchProxyStatus asks the lockproxy at endpoint for its status (its
// clients, the sessions it renews per cell), like FetchStatus.
func FetchProxyStatus(ctx context.Context, endpoint, authToken string) (api.ProxyStatus, error) {
	var out api.ProxyStatus
	return out, probe(ctx, endpoint, authToken, api.RouteStatus, &out)
}

// FetchDirectory reads the directory from the lockd or lockproxy at
// endpoint, like FetchStatus.
func FetchDirectory(ctx context.Context, endpoint, authToken string) (api.DirectoryResponse, error) {
	var out api.DirectoryResponse
	return out, probe(ctx, endpoint, authToken, api.RouteDirectory, &out)
}

// probe is one GET of route on endpoint, decoded into out.
func probe(ctx context.Context, endpoint, authToken, route string, out any) error {
	t := newTransport("status", authToken, 1)
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
