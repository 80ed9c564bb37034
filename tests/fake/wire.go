package fake

// The binary KeepAlive encoding (api.ContentTypeWire), spoken as a lockd
// speaks it: a KeepAlive or batch sent in it is decoded on arrival (the
// request is recorded, and handed to a hook, as its JSON, so tests read
// one form), and its 200 reply is encoded in it; a refusal stays JSON. A
// cell made with Options.NoWire is a lockd older than the encoding: it
// reads every body as JSON.

import (
	"encoding/json"

	"github.com/lockservice/lockd/api"
)

// wireMessages are the request and reply of each route that takes the
// binary encoding, made afresh.
var wireMessages = map[string]func() (api.WireDecoder, wireReply){
	api.RouteSessionKeepAlive: func() (api.WireDecoder, wireReply) {
		return &api.KeepAliveRequest{}, &api.SessionResponse{}
	},
	api.RouteKeepAliveBatch: func() (api.WireDecoder, wireReply) {
		return &api.KeepAliveBatchRequest{}, &api.KeepAliveBatchResponse{}
	},
}

// wireReply is a route's reply type in both encodings.
type wireReply interface {
	api.WireEncoder
	api.WireDecoder
}

// isWire reports whether a request on route came in the binary encoding
// (its Content-Type says so, and the route takes it).
func isWire(route string, ctype []byte) bool {
	return wireMessages[route] != nil && api.IsWireContentType(ctype)
}

// fromWire turns a binary request body on route (isWire) into its JSON,
// or refuses one that does not decode.
func fromWire(route string, body []byte) ([]byte, *api.Error) {
	req, _ := wireMessages[route]()
	if err := req.UnmarshalWire(body); err != nil {
		return nil, api.AsError(err)
	}
	j, err := json.Marshal(req)
	if err != nil {
		return nil, api.Errorf(api.CodeInternal, "fake: %v", err)
	}
	return j, nil
}

// toWire encodes a 200 reply to a binary request: resp as it is if it is
// the route's reply, else through its JSON (a hook's own reply type).
func toWire(route string, resp any) ([]byte, error) {
	if m, ok := resp.(api.WireEncoder); ok {
		return m.AppendWire(nil), nil
	}
	_, out := wireMessages[route]()
	j, err := json.Marshal(resp)
	if err == nil {
		err = json.Unmarshal(j, out)
	}
	if err != nil {
		return nil, err
	}
	return out.AppendWire(nil), nil
}
