package httpapi

// The binary KeepAlive encoding (api.ContentTypeWire) on the two routes
// that take it: a client's KeepAlive and a lockproxy's batch. A request
// sent in it is decoded from it and answered in it when it succeeds; a
// refusal is answered in JSON with its usual status (bad_request, 400,
// for a body that does not decode). Every other route, and a request in
// JSON, is JSON as always.

import (
	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// wireRoutes are the routes that take and answer the binary encoding.
var wireRoutes = map[string]bool{api.RouteSessionKeepAlive: true, api.RouteKeepAliveBatch: true}

// wireRequest reports whether ctx is a request in the binary encoding on a
// route that takes it.
func wireRequest(ctx *fasthttp.RequestCtx) bool {
	return api.IsWireContentType(ctx.Request.Header.ContentType()) && wireRoutes[string(ctx.Path())]
}

// decodeWire decodes a KeepAlive route's body: binary if it came so, else
// JSON.
func decodeWire(ctx *fasthttp.RequestCtx, v api.WireDecoder) error {
	if wireRequest(ctx) {
		return v.UnmarshalWire(ctx.PostBody())
	}
	return decode(ctx, v)
}

// replyWire answers a binary request's success in the binary encoding, and
// reports whether it did (else the reply is JSON).
func replyWire(resp *fasthttp.Response, f facts, v any) bool {
	m, ok := v.(api.WireEncoder)
	if !ok || !f.wire {
		return false
	}
	resp.Header.SetContentType(api.ContentTypeWire)
	resp.SetStatusCode(fasthttp.StatusOK)
	resp.SetBody(m.AppendWire(nil))
	return true
}
