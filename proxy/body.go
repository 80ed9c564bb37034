package proxy

// How much of a client's request body the proxy's HTTP server reads before
// its handler runs: bodies are read whole (not streamed), so an idle
// client connection keeps no read buffer, within a bound decided from the
// header alone.

import (
	"crypto/subtle"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/httpbody"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/internal/tlsutil"
)

// strangerBody bounds the body read from a client whose token this proxy
// does not know yet (a stranger, or a token made a moment ago): as much
// as a connection's read buffer held while bodies streamed. A KeepAlive
// or a small write fits; a larger body from a token new here is asked to
// retry once the proxy has read the tenants (ErrorHandler).
const strangerBody = 4 << 10

// requestConfigFor is the server's HeaderReceived hook when bodies are
// read whole (readWhole: no TLS), else none.
func (p *Proxy) requestConfigFor(readWhole bool) func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
	if !readWhole {
		return nil
	}
	return p.requestConfig
}

// requestConfig is the server's HeaderReceived hook: a request that takes
// no body (not a POST, or /healthz, /metrics) gets one byte, a client
// whose token the proxy knows api.MaxRequestBody, any other
// strangerBody. The handler still refuses a body past
// api.MaxRequestBody, and authenticates before it reads one.
func (p *Proxy) requestConfig(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	return fasthttp.RequestConfig{MaxRequestBodySize: p.bodyBound(h)}
}

// bodyBound is requestConfig's bound. A body of a known length within
// strangerBody needs no look-up of the token (a KeepAlive, most writes).
func (p *Proxy) bodyBound(h *fasthttp.RequestHeader) int {
	if mutant.On(mutant.ProxyBody) {
		return api.MaxBatchBody
	}
	if !h.IsPost() {
		return 1
	}
	if route := httpbody.HeaderRoute(h); route == api.RouteHealth || route == api.RouteMetrics {
		return 1
	}
	if n := h.ContentLength(); n >= 0 && n <= strangerBody {
		return strangerBody
	}
	if p.knownToken(h) {
		return api.MaxRequestBody
	}
	return strangerBody
}

// knownToken reports whether h carries a token in the proxy's current
// view of the tenants (any caller, without auth). It never waits for a
// read of the tenants.
func (p *Proxy) knownToken(h *fasthttp.RequestHeader) bool {
	if !p.authRequired() {
		return true
	}
	tok, err := api.BearerToken(string(h.Peek(api.HeaderAuth)))
	if err != nil || tok == "" {
		return false
	}
	digest := api.TokenDigest(tok)
	if subtle.ConstantTimeCompare([]byte(digest), []byte(p.ownDigest)) == 1 {
		return true
	}
	_, ok := lookup(p.auth.current(), digest)
	return ok
}

// errorHandler answers a request fasthttp refused before the handler ran,
// in JSON as every refusal. A body past requestConfig's bound is refused
// unread, as the handler would: a client without the certificate or a
// token is unauthorized; a known client's body past api.MaxRequestBody
// is value_too_large; one that was over strangerBody only because its
// token was new here is asked to retry.
func (p *Proxy) errorHandler(ctx *fasthttp.RequestCtx, err error) {
	if !errors.Is(err, fasthttp.ErrBodyTooLarge) {
		reply(ctx, nil, api.Errorf(api.CodeBadRequest, "malformed request: %v", err))
		return
	}
	ctx.SetConnectionClose()
	route := string(ctx.Path())
	switch {
	case route == "/":
		// No route; or a chunked body that ran past the bound, after
		// which fasthttp has reset the request (route and token gone).
		reply(ctx, nil, api.Errorf(api.CodeValueTooLarge, "request body too large"))
		return
	case !ctx.IsPost() || route == api.RouteHealth || route == api.RouteMetrics:
		reply(ctx, nil, api.Errorf(api.CodeValueTooLarge, "%s takes no body", route))
		return
	case p.cfg.TLS != nil && !tlsutil.HasClientCert(ctx.TLSConnectionState()):
		reply(ctx, nil, api.Errorf(api.CodeUnauthorized, "this lockproxy requires a client certificate its CA signed (mutual TLS)"))
		return
	}
	if _, err := p.authenticate(p.ctx, ctx); err != nil {
		reply(ctx, nil, err)
		return
	}
	if n := ctx.Request.Header.ContentLength(); n >= 0 && n <= api.MaxRequestBody {
		e := api.Errorf(api.CodeUnavailable, "token new to this lockproxy; retry")
		e.NotApplied = true
		reply(ctx, nil, e)
		return
	}
	reply(ctx, nil, api.Errorf(api.CodeValueTooLarge, "request body over %d bytes", api.MaxRequestBody))
}
