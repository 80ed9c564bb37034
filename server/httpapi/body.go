package httpapi

import (
	"io"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// bodyLimit is how many body bytes route may carry for p: a lockproxy's
// KeepAlive batch (an admin's) up to api.MaxBatchBody, anything else up
// to api.MaxRequestBody.
func bodyLimit(route string, p principal) int {
	if route == api.RouteKeepAliveBatch && (p.admin || brokenBodyLimit) {
		return api.MaxBatchBody
	}
	return api.MaxRequestBody
}

// readBody reads the request's body, refusing one over limit. The lockd's
// server streams bodies past api.MaxRequestBody (StreamRequestBody), so
// this is the only place a large body is read: after the caller was
// authenticated and only as far as its route allows. A refused body is
// left unread and the connection closed after the answer.
func readBody(ctx *fasthttp.RequestCtx, limit int) error {
	tooLarge := func() error {
		ctx.SetConnectionClose()
		return api.Errorf(api.CodeValueTooLarge, "request body over %d bytes", limit)
	}
	if n := ctx.Request.Header.ContentLength(); n > limit {
		return tooLarge()
	}
	if !ctx.Request.IsBodyStream() {
		if len(ctx.PostBody()) > limit {
			return tooLarge()
		}
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(ctx.RequestBodyStream(), int64(limit)+1))
	if err != nil {
		ctx.SetConnectionClose()
		return api.Errorf(api.CodeBadRequest, "read the request body: %v", err)
	}
	if len(b) > limit {
		return tooLarge()
	}
	ctx.Request.SetBody(b)
	return nil
}
