package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/valyala/fasthttp"
)

// call describes one logical request to a cell for the retry loop.
type call struct {
	method string // "POST" unless set
	route  string
	req    any // marshalled afresh for every attempt (after before runs)
	resp   any // decoded from a 2xx reply; may be nil

	keepAlive  bool          // use the KeepAlive connection pool
	timeout    time.Duration // attempt timeout; 0 → Config.RequestTimeout
	anyReplica bool          // any replica answers (directory); do not learn a leader from it

	// retryUnsure lets the loop resend after failures whose outcome is
	// unknown (unavailable, a connection lost after sending). True for reads
	// and for writes deduplicated by a session request id.
	retryUnsure bool
	// duringClose lets the call run while the client is closing (the
	// session close requests Close itself sends).
	duringClose bool
	// before runs before every attempt (to refresh a write's ack).
	before func()

	// Set by do on success.
	sent     time.Time // when the successful attempt was sent
	attempts int
}

const (
	backoffBase = 20 * time.Millisecond
	backoffMax  = 1 * time.Second
	// maxFreeRedirects is how many not_leader redirects with a fresh hint
	// a call follows at once before backing off between them.
	maxFreeRedirects = 3
)

// backoff is a full-jitter exponential delay for the n-th retry (n ≥ 0),
// in [d/2, d] with d = min(backoffMax, backoffBase·2ⁿ).
func backoff(n int) time.Duration {
	d := backoffMax
	if n < 10 {
		d = min(backoffMax, backoffBase<<n)
	}
	return d/2 + rand.N(d/2+1)
}

// do is the SDK's one retry loop. It sends cl to cs — the last known
// leader, else the next replica in rotation — and:
//   - on not_leader follows the leader hint, or rotates when there is none;
//   - on transport errors and unavailable rotates/retries with jittered
//     backoff until ctx ends (only when the outcome cannot have been a
//     duplicate: the call is retryUnsure or the request never left);
//   - returns every other error code at once.
//
// Errors are *api.Error (or wrap one); ErrClosed once the client closes.
func (c *Client) do(ctx context.Context, cs *cellState, cl *call) error {
	method := cl.method
	if method == "" {
		method = http.MethodPost
	}
	timeout := cl.timeout
	if timeout <= 0 {
		timeout = c.timeout
	}
	var closing <-chan struct{}
	if !cl.duringClose {
		closing = c.ctx.Done()
	}
	var (
		last      *api.Error
		redirects int
		lastAddr  string
		unavail   int // consecutive unavailable replies from lastAddr
		retries   int
	)
	giveUp := func(err error) error {
		if c.closed.Load() && !cl.duringClose {
			return ErrClosed
		}
		where := fmt.Sprintf("on cell %q", cs.name)
		if cs.name == "" {
			where = "from any endpoint"
		}
		msg := fmt.Sprintf("%s %s: gave up after %d attempts: %v", cl.route, where, cl.attempts, err)
		if last != nil {
			msg += " (last error: " + last.Error() + ")"
		}
		return &gaveUpError{apiErr: &api.Error{Code: api.CodeUnavailable, Message: msg}, ctxErr: err}
	}
	wait := func() error {
		t := time.NewTimer(backoff(retries))
		retries++
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return giveUp(ctx.Err())
		case <-closing:
			return ErrClosed
		}
	}

	for {
		if err := ctx.Err(); err != nil {
			return giveUp(err)
		}
		if closing != nil && c.closed.Load() {
			return ErrClosed
		}
		addr := cs.pick()
		if addr == "" {
			return api.Errorf(api.CodeUnavailable, "cell %q has no endpoints", cs.name)
		}
		if cl.before != nil {
			cl.before()
		}
		var body []byte
		if cl.req != nil {
			b, err := json.Marshal(cl.req)
			if err != nil {
				return api.Errorf(api.CodeBadRequest, "encode %s: %v", cl.route, err)
			}
			body = b
		}
		tr := c.bulk
		if cl.keepAlive {
			tr = c.ka
		}
		cl.attempts++
		status, rbody, sent, err := tr.roundTrip(ctx, exchange{method: method, addr: addr, path: cl.route, body: body, timeout: timeout})

		if err != nil {
			if ctx.Err() != nil {
				return giveUp(ctx.Err())
			}
			if errors.Is(err, errTransportClosed) || (closing != nil && c.closed.Load()) {
				return ErrClosed
			}
			cs.failed(addr)
			var de *dialError
			notSent := errors.As(err, &de) || errors.Is(err, fasthttp.ErrNoFreeConns)
			last = api.Errorf(api.CodeUnavailable, "%s %s: %v", addr, cl.route, err)
			if !notSent && !cl.retryUnsure {
				last.Message += "; the outcome is unknown"
				return last
			}
			c.log.Debug("lockd request failed, retrying", "cell", cs.name, "endpoint", addr, "route", cl.route, "err", err)
			if err := wait(); err != nil {
				return err
			}
			continue
		}

		if status >= 200 && status < 300 {
			if cl.resp != nil && len(rbody) > 0 {
				if err := json.Unmarshal(rbody, cl.resp); err != nil {
					return api.Errorf(api.CodeInternal, "decode %s reply from %s: %v", cl.route, addr, err)
				}
			}
			if !cl.anyReplica {
				cs.answered(addr)
			}
			cl.sent = sent
			return nil
		}

		aerr := decodeError(status, rbody, addr)
		last = aerr
		switch aerr.Code {
		case api.CodeNotLeader:
			// Never applied: always safe to resend.
			cs.redirect(addr, aerr.Leader)
			unavail = 0
			if aerr.Leader != "" && aerr.Leader != addr && redirects < maxFreeRedirects {
				redirects++
				continue
			}
			if err := wait(); err != nil {
				return err
			}
		case api.CodeUnavailable:
			if !cl.retryUnsure {
				return aerr
			}
			if addr == lastAddr {
				unavail++
			} else {
				unavail = 1
			}
			// A leader that keeps answering unavailable may have lost its
			// quorum to a new leader elsewhere: look around.
			if unavail >= 2 {
				cs.failed(addr)
				unavail = 0
			}
			if err := wait(); err != nil {
				return err
			}
		case api.CodeWrongCell:
			// The directory is stale (a prefix moved): reload it so the
			// caller's retry is routed right.
			if cs != c.seeds {
				rctx, cancel := context.WithTimeout(ctx, timeout)
				if err := c.RefreshDirectory(rctx); err != nil {
					c.log.Warn("directory refresh after wrong_cell failed", "err", err)
				}
				cancel()
			}
			return aerr
		default:
			return aerr
		}
		lastAddr = addr
	}
}

// decodeError turns a non-2xx reply into an *api.Error, synthesising one
// when the body is not an api.ErrorResponse (a proxy or router answered).
func decodeError(status int, body []byte, addr string) *api.Error {
	var er api.ErrorResponse
	if err := json.Unmarshal(body, &er); err == nil && er.Error != nil && er.Error.Code != "" {
		return er.Error
	}
	snippet := string(body)
	if len(snippet) > 200 {
		snippet = snippet[:200]
	}
	code := api.CodeInternal
	switch status {
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		code = api.CodeUnavailable
	case http.StatusUnauthorized, http.StatusForbidden:
		code = api.CodeUnauthorized
	}
	return api.Errorf(code, "HTTP %d from %s: %q", status, addr, snippet)
}
