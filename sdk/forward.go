package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
)

// Forward is for lockproxy: it sends an already encoded request to cell's
// leader (following not_leader hints and holding through an election, as
// every SDK call does) and returns the reply's body. An *api.Error comes
// back for a refusal, to be passed on to the proxy's client as is. With
// RetryUnsure false the request is sent again only when it cannot have
// reached a replica (a connection refused, a not_leader answer): the
// proxy's client decides whether an unsure outcome may be resent. cell ""
// sends to any replica (the directory).
func (c *Client) Forward(ctx context.Context, cell, route string, body []byte, o ForwardOptions) ([]byte, error) {
	cs := c.seeds
	if cell != "" {
		var err error
		if cs, err = c.forwardCell(ctx, cell, o); err != nil {
			return nil, err
		}
	}
	var resp json.RawMessage
	cl := &call{route: route, req: json.RawMessage(body), resp: &resp, keepAlive: o.KeepAlive, timeout: o.Timeout, dirIndex: o.DirectoryIndex,
		retryUnsure: o.RetryUnsure, anyReplica: cell == "", auth: authHeader{value: o.Authorization, forward: !o.Own, client: o.ClientAddr}}
	if o.Method != "" {
		cl.method, cl.req = o.Method, nil
	}
	if err := c.do(ctx, cs, cl); err != nil {
		return nil, err
	}
	if len(resp) == 0 {
		resp = json.RawMessage("{}")
	}
	return resp, nil
}

// ForwardWire is Forward for a request with a binary encoding (a
// lockproxy's KeepAlive batch), decoded into resp: sent in
// api.ContentTypeWire unless Config.JSONKeepAlives is set or the endpoint
// refused it (then in JSON, and resp decoded from JSON). o.Method is
// ignored: it is a POST.
func (c *Client) ForwardWire(ctx context.Context, cell, route string, req api.WireEncoder, resp api.WireDecoder, o ForwardOptions) error {
	cs, err := c.forwardCell(ctx, cell, o)
	if err != nil {
		return err
	}
	cl := &call{route: route, req: req, resp: resp, keepAlive: o.KeepAlive, timeout: o.Timeout, dirIndex: o.DirectoryIndex,
		retryUnsure: o.RetryUnsure, auth: authHeader{value: o.Authorization, forward: !o.Own, client: o.ClientAddr}}
	return c.do(ctx, cs, cl)
}

// ForwardOptions tune Forward.
type ForwardOptions struct {
	Method      string        // "GET" sends no body; POST by default
	KeepAlive   bool          // the KeepAlive connection pool
	RetryUnsure bool          // resend after an unsure failure (the request is idempotent)
	Timeout     time.Duration // one attempt; 0: Config.RequestTimeout
	// Authorization is the proxy's client's Authorization header, passed
	// on exactly as it came: "" sends none. Forward never sends the
	// Client's own AuthToken (a proxy's credential is for its own calls).
	Authorization string
	// Own sends the Client's own token instead: for a proxy's own calls
	// (its KeepAlive batches), never for a request a client made.
	Own bool
	// ClientAddr is the proxy's client's address, sent as
	// api.HeaderClientAddr for the lockd's audit log ("" sends none).
	ClientAddr string
	// DirectoryIndex is the directory index the proxy's client routed by
	// (its api.HeaderDirectoryIndex; 0: none): a cell this client's view
	// lacks is refused unavailable, not wrong_cell, while the view is
	// behind it, and the lockd is told the later of the two.
	DirectoryIndex uint64
}

// forwardCell is the named cell a forwarded request goes to. A cell the
// client's view lacks even after a read (cellNamed) while the proxy's
// client has seen a later directory is one created since: refused
// unavailable and not applied, for that client to send again.
func (c *Client) forwardCell(ctx context.Context, cell string, o ForwardOptions) (*cellState, error) {
	cs, err := c.cellNamed(ctx, cell)
	if err == nil {
		return cs, nil
	}
	return c.unknownCell(cell, o.DirectoryIndex, err)
}

// UnknownCellError is for a lockproxy about to refuse with err
// (wrong_cell) a request naming cell, which the client's view lacked even
// after a read: nil if a read that landed meanwhile lists it, else its
// refusal (unknownCell).
func (c *Client) UnknownCellError(cell string, client uint64, err error) error {
	_, err = c.unknownCell(cell, client, err)
	return err
}

// unknownCell is the cell named if a read that landed after err (the
// view's refusal of it) lists it; else view-behind (unavailable, not
// applied) when the proxy's client routed by a later directory (index
// client; 0: none), a cell created since; else err.
func (c *Client) unknownCell(cell string, client uint64, err error) (*cellState, error) {
	d := c.dir.Load() // one view: its cells and its index agree
	if cs := d.cells[cell]; cs != nil {
		return cs, nil
	}
	if client > d.raw.Index && api.CodeOf(err) == api.CodeWrongCell && !mutant.On(mutant.ProxyViewBehind) {
		return nil, api.ViewBehindError("lockproxy", "cell "+cell, d.raw.Index, client)
	}
	return nil, err
}

// ErrorOf returns err as the *api.Error a proxy answers with.
func ErrorOf(err error) *api.Error {
	if errors.Is(err, ErrClosed) {
		return api.Errorf(api.CodeUnavailable, "proxy shutting down")
	}
	return api.AsError(err)
}
