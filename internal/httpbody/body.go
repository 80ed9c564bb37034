// Package httpbody reads a request's body within a bound, for servers
// that stream bodies (fasthttp's StreamRequestBody) so that nothing is
// read before the caller is known: a lockd's API and a lockproxy's.
package httpbody

import (
	"io"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// Read reads the request's body, refusing one over limit with
// value_too_large. A refused body is left unread and the connection closed
// after the answer.
func Read(ctx *fasthttp.RequestCtx, limit int) error {
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
