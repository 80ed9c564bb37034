package httpapi

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// bodyLimit is how many body bytes route may carry for p: a lockproxy's
// KeepAlive batch (an admin's) up to api.MaxBatchBody, anything else up
// to api.MaxRequestBody.
func bodyLimit(route string, p principal) int {
	if route == api.RouteKeepAliveBatch && (p.admin || mutant.On(mutant.BodyLimit)) {
		return api.MaxBatchBody
	}
	return api.MaxRequestBody
}
