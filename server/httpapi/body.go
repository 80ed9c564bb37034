package httpapi

import (
	"crypto/subtle"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/httpbody"
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

// RequestConfig is the HTTP server's HeaderReceived hook: how much of a
// request's body fasthttp reads before the handler runs, decided from its
// header alone. A route that takes no body gets one byte (any body is
// then refused by route); a KeepAlive batch whose token is an admin's in
// this lockd's view gets api.MaxBatchBody; anything else
// api.MaxRequestBody. Bodies are read whole rather than streamed, so an
// idle connection keeps no read buffer (ReduceMemoryUsage). The handler
// checks the body against the caller it authenticated (bodyLimit), so this
// only bounds what is read: a body past it is refused by ErrorHandler,
// unread, as the caller's authentication decides.
func (s *Server) RequestConfig(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	route := httpbody.HeaderRoute(h)
	limit := api.MaxRequestBody
	switch {
	case mutant.On(mutant.BodyLimit):
		limit = api.MaxBatchBody
	case !h.IsPost() || bodyless(route):
		limit = 1
	case route == api.RouteKeepAliveBatch && s.headerAdmin(h):
		limit = api.MaxBatchBody
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: limit}
}

// headerAdmin reports whether h's token is an admin's in this lockd's
// current view (every caller is, without auth). It never reads the
// directory: a token new here gets the ordinary limit (ErrorHandler asks
// for a retry once it is known).
func (s *Server) headerAdmin(h *fasthttp.RequestHeader) bool {
	if !s.auth {
		return true
	}
	tok, err := api.BearerToken(string(h.Peek(api.HeaderAuth)))
	if err != nil || tok == "" {
		return false
	}
	if subtle.ConstantTimeCompare([]byte(api.TokenDigest(tok)), []byte(s.adminDigest)) == 1 {
		return true
	}
	t, ok := s.host.Directory().TenantByToken(tok)
	return ok && t.IsAdmin()
}

// ErrorHandler answers requests fasthttp rejects before routing with the
// same JSON error body as every other failure. A body past RequestConfig's
// bound is refused unread, as route would refuse it: a caller without the
// client certificate or token the lockd requires is unauthorized, any
// other's body is value_too_large (an admin's batch refused only because
// its token was new here is asked to retry).
func (s *Server) ErrorHandler(ctx *fasthttp.RequestCtx, err error) {
	if !errors.Is(err, fasthttp.ErrBodyTooLarge) {
		writeError(ctx, fasthttp.StatusBadRequest, api.Errorf(api.CodeBadRequest, "malformed request: %v", err))
		return
	}
	ctx.SetConnectionClose()
	route := string(ctx.Path())
	switch {
	case route == "/":
		// No route; or a chunked body that ran past the bound, after
		// which fasthttp has reset the request (its route and token
		// are gone).
		s.reply(ctx, nil, api.Errorf(api.CodeValueTooLarge, "request body too large"))
		return
	case bodyless(route):
		s.reply(ctx, nil, api.Errorf(api.CodeValueTooLarge, "%s takes no body", route))
		return
	}
	// Counted as the handler counts what it answers (not the time: the
	// body was not read).
	code := s.reply(ctx, nil, s.oversizeRefusal(ctx, route))
	s.requests.WithLabelValues(routeLabel(route), code).Observe(0)
}

// oversizeRefusal is why a request to route whose body ran past
// RequestConfig's bound is refused.
func (s *Server) oversizeRefusal(ctx *fasthttp.RequestCtx, route string) error {
	p, err := s.caller(ctx, route)
	switch limit := bodyLimit(route, p); {
	case err != nil:
		return err
	case !ctx.IsPost():
		return api.Errorf(api.CodeBadRequest, "%s takes POST", route)
	case limit > api.MaxRequestBody && ctx.Request.Header.ContentLength() <= limit:
		e := api.Errorf(api.CodeUnavailable, "token new to this lockd; retry")
		e.NotApplied = true
		return e
	default:
		return api.Errorf(api.CodeValueTooLarge, "request body over %d bytes", limit)
	}
}
