package sdk

// The binary KeepAlive encoding (api.ContentTypeWire): a call whose
// request has one (api.WireEncoder: a KeepAlive, a lockproxy's batch) is
// sent in it unless Config.JSONKeepAlives is set or its endpoint refused
// it before; its reply is decoded from it when the reply came so (the
// version byte tells). An endpoint that refuses a binary request (415, or
// bad_request: a server older than the encoding reads the body as JSON)
// gets the call again at once in JSON, and JSON from then on: the client
// remembers it (up to maxJSONEndpoints endpoints; past that, each call
// learns it again).

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/lockservice/lockd/api"
)

// maxJSONEndpoints bounds the endpoints a client remembers as taking JSON
// only (a cell's replicas and the proxies: a handful each).
const maxJSONEndpoints = 1024

// wireEndpoints remembers the endpoints that refused the binary encoding.
type wireEndpoints struct {
	mu       sync.Mutex
	jsonOnly map[string]bool
}

func (w *wireEndpoints) refused(addr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.jsonOnly[addr]
}

// remember records addr as taking JSON only; false when it was already,
// or the table is full.
func (w *wireEndpoints) remember(addr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.jsonOnly[addr] || len(w.jsonOnly) >= maxJSONEndpoints {
		return false
	}
	if w.jsonOnly == nil {
		w.jsonOnly = map[string]bool{}
	}
	w.jsonOnly[addr] = true
	return true
}

// encodeRequest is cl's body for an attempt at addr and its content type
// ("" without a body).
func (c *Client) encodeRequest(cl *call, addr string) ([]byte, string, error) {
	if cl.req == nil {
		return nil, "", nil
	}
	if m, ok := cl.req.(api.WireEncoder); ok && !cl.json && !c.cfg.JSONKeepAlives && !c.wire.refused(addr) {
		return m.AppendWire(nil), api.ContentTypeWire, nil
	}
	b, err := json.Marshal(cl.req)
	return b, "application/json", err
}

// wireRefusal reports whether r is its endpoint's refusal of the binary
// encoding: 415, or bad_request to a binary request. Pure.
func wireRefusal(r attemptResult) bool {
	if !r.wire || r.err != nil {
		return false
	}
	switch r.status {
	case http.StatusUnsupportedMediaType:
		return true
	case http.StatusBadRequest:
		return decodeError(r.status, r.body, r.addr).Code == api.CodeBadRequest
	}
	return false
}

// fellBack reports whether attempt r was a refusal of the binary
// encoding: then cl goes on in JSON (it is sent again at once; a request
// refused unread applied nothing), and r's endpoint is remembered.
func (c *Client) fellBack(cl *call, r attemptResult) bool {
	if cl.json || !wireRefusal(r) {
		return false
	}
	cl.json = true
	if c.wire.remember(r.addr) {
		c.log.Info("endpoint refused the binary KeepAlive encoding; using JSON with it", "endpoint", r.addr, "route", cl.route)
	}
	return true
}

// decodeReply decodes a 2xx reply's body into resp: from the binary
// encoding when it came so, else from JSON.
func decodeReply(body []byte, resp any) error {
	if d, ok := resp.(api.WireDecoder); ok && api.IsWire(body) {
		return d.UnmarshalWire(body)
	}
	return json.Unmarshal(body, resp)
}
