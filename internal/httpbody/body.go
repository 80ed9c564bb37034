// Package httpbody reads a request's body within a bound, whether the
// server streamed it (fasthttp's StreamRequestBody: with TLS, nothing
// past fasthttp's read-ahead is read before the caller is known) or read
// it whole within a bound its HeaderReceived hook chose from the header
// (HeaderRoute): a lockd's API and a lockproxy's.
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

// HeaderRoute is the path of h's request URI, normalized as a handler's
// ctx.Path() is (slashes collapsed, percent-decoded, an absolute URI's
// scheme and host dropped): the route a HeaderReceived hook decides a
// body's bound by ("" if the URI does not parse).
func HeaderRoute(h *fasthttp.RequestHeader) string {
	u := fasthttp.AcquireURI()
	defer fasthttp.ReleaseURI(u)
	if err := u.Parse(h.Host(), h.RequestURI()); err != nil {
		return ""
	}
	return string(u.Path())
}
