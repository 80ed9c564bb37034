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
	t := newTransport("status", authToken, 1)
	defer t.close()
	status, body, _, err := t.roundTrip(ctx, exchange{method: http.MethodGet, addr: endpoint, path: api.RouteStatus, timeout: DefaultRequestTimeout})
	if err != nil {
		return out, api.Errorf(api.CodeUnavailable, "%s: %v", endpoint, err)
	}
	if status < 200 || status >= 300 {
		return out, decodeError(status, body, endpoint)
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return out, api.Errorf(api.CodeInternal, "decode status from %s: %v", endpoint, err)
	}
	return out, nil
}
