package proxy

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestBatchRefusal: a client's batch is refused with its authentication
// error, as a lockd refuses a non-admin, and to an admin as a request a
// proxy does not take.
func TestBatchRefusal(t *testing.T) {
	unauth := api.Errorf(api.CodeUnauthorized, "no token")
	for _, tc := range []struct {
		name    string
		who     principal
		authErr error
		want    api.Code
	}{
		{"not authenticated", principal{}, unauth, api.CodeUnauthorized},
		{"a tenant", principal{tenant: "t1"}, nil, api.CodeForbidden},
		{"an admin", principal{admin: true}, nil, api.CodeBadRequest},
	} {
		if got := api.CodeOf(batchRefusal(tc.who, tc.authErr)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
