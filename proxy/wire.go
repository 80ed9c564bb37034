package proxy

// The binary KeepAlive encoding (api.ContentTypeWire) between the proxy
// and its clients, and on its batches to the leaders. A client's KeepAlive
// sent in it is decoded from it and, when it succeeds, answered in it; a
// refusal is JSON with its usual status, as from a lockd.

import (
	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// wireRequest reports whether a client's request came in the binary
// encoding (only a KeepAlive's is read so: every other route forwards the
// client's body to the leader as it came).
func wireRequest(ctx *fasthttp.RequestCtx) bool {
	return api.IsWireContentType(ctx.Request.Header.ContentType())
}

// decodeWire decodes a client's KeepAlive: binary if it came so, else JSON.
func decodeWire(ctx *fasthttp.RequestCtx, v api.WireDecoder) error {
	if wireRequest(ctx) {
		return v.UnmarshalWire(ctx.PostBody())
	}
	return decode(ctx, v)
}

// replyKeepAlive answers a client's KeepAlive in its encoding (a refusal
// in JSON).
func replyKeepAlive(ctx *fasthttp.RequestCtx, resp api.SessionResponse, err error) {
	replyKeepAliveTo(&ctx.Response, wireRequest(ctx), resp, err)
}

// replyKeepAliveTo writes a KeepAlive's answer into r: in the binary
// encoding if its request came in it (wire), a refusal in JSON.
func replyKeepAliveTo(r *fasthttp.Response, wire bool, resp api.SessionResponse, err error) {
	if err != nil || !wire {
		replyTo(r, resp, err)
		return
	}
	r.Header.SetContentType(api.ContentTypeWire)
	r.SetStatusCode(fasthttp.StatusOK)
	r.SetBody(resp.AppendWire(nil))
}

// wireBatch is a batch part with its binary encoding made once (its size
// decides whether the part is split): the SDK sends these bytes, or the
// part in JSON to a lockd that does not take the binary encoding.
type wireBatch struct {
	*api.KeepAliveBatchRequest
	wire []byte
}

// AppendWire appends the part's encoding made beforehand.
func (w wireBatch) AppendWire(b []byte) []byte { return append(b, w.wire...) }
