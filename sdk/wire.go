package sdk

// The binary KeepAlive encoding (api.ContentTypeWire): a call whose
// request has one (api.WireEncoder: a KeepAlive, a lockproxy's batch) is
// sent in it unless Config.JSONKeepAlives is set or its endpoint refused
// it before; its reply is decoded from it when the reply came so (the
// version byte tells). An endpoint that refuses a binary request (415, or
// bad_request: a server older than the encoding reads the body as JSON)
// gets the call again at once in JSON, and JSON for wireRetryAfter: the
// client remembers it (up to maxJSONEndpoints endpoints; past that, each
// call learns it again), then tries binary again, so an endpoint upgraded
// since (or one that refused a single malformed request) gets it back.

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"
)

// maxJSONEndpoints bounds the endpoints a client remembers as taking JSON
// only (a cell's replicas and the proxies: a handful each).
const maxJSONEndpoints = 1024

// wireRetryAfter is how long an endpoint that refused the binary
// encoding gets JSON before the client tries binary with it again.
const wireRetryAfter = 10 * time.Minute

// wireEndpoints remembers the endpoints that refused the binary encoding,
// and when.
type wireEndpoints struct {
	mu       sync.Mutex
	jsonOnly map[string]time.Time
}

// refused reports whether addr refused the binary encoding less than
// wireRetryAfter before now; a refusal older than that is forgotten.
func (w *wireEndpoints) refused(addr string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.jsonOnly[addr]
	if ok && now.Sub(at) >= wireRetryAfter {
		delete(w.jsonOnly, addr)
		return false
	}
	return ok
}

// remember records that addr refused the binary encoding at now; false
// when it was already remembered, or the table is full.
func (w *wireEndpoints) remember(addr string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.jsonOnly[addr]; ok || len(w.jsonOnly) >= maxJSONEndpoints {
		return false
	}
	if w.jsonOnly == nil {
		w.jsonOnly = map[string]time.Time{}
	}
	w.jsonOnly[addr] = now
	return true
}

// encodeRequest is cl's body for an attempt at addr and its content type
// ("" without a body).
func (c *Client) encodeRequest(cl *call, addr string) ([]byte, string, error) {
	if cl.req == nil {
		return nil, "", nil
	}
	if m, ok := cl.req.(api.WireEncoder); ok && !cl.json && !c.cfg.JSONKeepAlives && !c.wire.refused(addr, time.Now()) {
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
	if c.wire.remember(r.addr, time.Now()) {
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
