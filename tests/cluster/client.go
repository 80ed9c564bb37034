package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/api"
)

// Client is a minimal JSON-over-HTTP client of the lockd API, for tests.
// Do follows not_leader hints and retries unavailable replies and transport
// errors with a bounded backoff until its context expires. It sends the
// same body on every attempt, so a write is safe to retry only if it
// carries a session and request id (the cell deduplicates it). It is not
// the SDK: no sessions, no keepalives, no watches of its own.
type Client struct {
	// AttemptTimeout bounds one HTTP attempt; a keepalive's wait_ms is added
	// on top. Default 8s (above the server's 5s request timeout).
	AttemptTimeout time.Duration
	// MaxAttempts bounds the attempts of one call. Default 1000.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the pause between attempts. Defaults
	// 5ms and 200ms.
	MinBackoff, MaxBackoff time.Duration
	// CallTimeout bounds a call whose context has no deadline. Default 60s.
	CallTimeout time.Duration
	// Token, if set, is sent as the bearer token of every request.
	Token string
	// Authorization, if set, is sent as the Authorization header as it
	// is, instead of Token's (a hostile client's malformed headers).
	Authorization string

	endpoints []string
	http      *http.Client
	scheme    string

	mu        sync.Mutex
	preferred map[string]string // routing key (cell or prefix) → endpoint
	next      int

	attempts, retries atomic.Uint64
}

// NewClient returns a client over the given API addresses (host:port).
func NewClient(endpoints ...string) *Client {
	return &Client{
		AttemptTimeout: 8 * time.Second,
		MaxAttempts:    1000,
		MinBackoff:     5 * time.Millisecond,
		MaxBackoff:     200 * time.Millisecond,
		CallTimeout:    60 * time.Second,
		endpoints:      append([]string(nil), endpoints...),
		http: &http.Client{Transport: &http.Transport{
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     60 * time.Second,
			DisableCompression:  true,
		}},
		preferred: map[string]string{},
		scheme:    "http",
	}
}

// UseTLS makes the client speak HTTPS with cfg (its certificate and the CA).
func (c *Client) UseTLS(cfg *tls.Config) {
	c.http.Transport.(*http.Transport).TLSClientConfig = cfg
	c.scheme = "https"
}

// Close drops idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Endpoints are the client's API addresses.
func (c *Client) Endpoints() []string { return append([]string(nil), c.endpoints...) }

// Stats returns the attempts made and how many of them were retries.
func (c *Client) Stats() (attempts, retries uint64) { return c.attempts.Load(), c.retries.Load() }

// HTTPError is a non-2xx reply whose body is not an API error.
type HTTPError struct {
	Status int
	Body   string
}

func (e *HTTPError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// DecodeError turns a non-2xx reply into an error: the body's *api.Error if
// it has one, else an *HTTPError.
func DecodeError(status int, body []byte) error {
	var er api.ErrorResponse
	if json.Unmarshal(body, &er) == nil && er.Error != nil && er.Error.Code != "" {
		return er.Error
	}
	return &HTTPError{Status: status, Body: string(body)}
}

// Do POSTs req as JSON to route and decodes a 2xx reply into resp (if not
// nil). An error reply comes back as *api.Error. req may be a []byte or
// json.RawMessage to send as is.
func (c *Client) Do(ctx context.Context, route string, req, resp any) error {
	var body []byte
	switch r := req.(type) {
	case []byte:
		body = r
	case json.RawMessage:
		body = r
	default:
		var err error
		if body, err = json.Marshal(req); err != nil {
			return err
		}
	}
	status, b, err := c.Raw(ctx, http.MethodPost, route, body)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return DecodeError(status, b)
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(b, resp); err != nil {
		return fmt.Errorf("%s: undecodable reply %q: %w", route, b, err)
	}
	return nil
}

// Raw sends body to route with method, following not_leader hints and
// retrying unavailable and transport errors like Do, and returns the final
// status and body, whatever they are.
func (c *Client) Raw(ctx context.Context, method, route string, body []byte) (int, []byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.CallTimeout)
		defer cancel()
	}
	key, wait := routing(body)
	attemptTimeout := c.AttemptTimeout + wait
	var (
		lastErr   error
		failures  int // consecutive failed attempts, for the backoff
		redirects int // consecutive hint redirects without a pause
		unavail   int // consecutive unavailable replies from one endpoint
	)
	for attempt := 0; attempt < c.MaxAttempts; attempt++ {
		if attempt > 0 {
			c.retries.Add(1)
		}
		ep := c.pick(key)
		status, b, err := c.Once(ctx, ep, method, route, body, attemptTimeout)
		if err != nil {
			if ctx.Err() != nil {
				return 0, nil, fmt.Errorf("%s: %w (last error: %v)", route, ctx.Err(), err)
			}
			lastErr = fmt.Errorf("%s via %s: %w", route, ep, err)
			c.rotate(key, ep)
			failures++
			if !c.sleep(ctx, failures) {
				break
			}
			continue
		}
		if status != http.StatusServiceUnavailable {
			return status, b, nil
		}
		e := DecodeError(status, b)
		lastErr = fmt.Errorf("%s via %s: %w", route, ep, e)
		failures++
		now, known := c.steer(key, ep, e, &redirects, &unavail)
		if !known {
			return status, b, nil // a 503 we do not know: the caller decides
		}
		if now {
			continue // follow the hint at once
		}
		redirects = 0
		if !c.sleep(ctx, failures) {
			break
		}
	}
	if ctx.Err() != nil {
		return 0, nil, fmt.Errorf("%w (%w)", lastErr, ctx.Err())
	}
	return 0, nil, fmt.Errorf("gave up after %d attempts: %w", c.MaxAttempts, lastErr)
}

// steer acts on Raw's 503 e from ep: not_leader moves key to the hinted
// leader (now: retry at once, for two hints in a row) or away from ep;
// unavailable moves key away from ep after three in a row. redirects and
// unavail are Raw's counts of those in a row. known is false for a 503
// Raw does not know, which goes back to the caller.
func (c *Client) steer(key, ep string, e error, redirects, unavail *int) (now, known bool) {
	switch api.CodeOf(e) {
	case api.CodeNotLeader:
		*unavail = 0
		var ae *api.Error
		errors.As(e, &ae)
		if ae.Leader != "" && ae.Leader != ep {
			c.prefer(key, ae.Leader)
			*redirects++
			if *redirects <= 2 {
				return true, true
			}
		} else {
			c.rotate(key, ep)
		}
	case api.CodeUnavailable:
		*unavail++
		if *unavail >= 3 {
			*unavail = 0
			c.rotate(key, ep)
		}
	default:
		return false, false
	}
	return false, true
}

// setAuth sets req's Authorization header: Authorization as it is, else
// Token as a bearer token, else none.
func (c *Client) setAuth(req *http.Request) {
	switch {
	case c.Authorization != "":
		req.Header.Set("Authorization", c.Authorization)
	case c.Token != "":
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
}

// Once makes exactly one attempt against endpoint, bounded by timeout (0:
// AttemptTimeout), and returns the status and body.
func (c *Client) Once(ctx context.Context, endpoint, method, route string, body []byte, timeout time.Duration) (int, []byte, error) {
	if timeout <= 0 {
		timeout = c.AttemptTimeout
	}
	c.attempts.Add(1)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.scheme+"://"+endpoint+route, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.setAuth(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// routing extracts the routing key (cell name or path prefix) and a
// keepalive's wait from a request body.
func routing(body []byte) (key string, wait time.Duration) {
	var r struct {
		Cell   string `json:"cell"`
		Path   string `json:"path"`
		WaitMS int64  `json:"wait_ms"`
	}
	if json.Unmarshal(body, &r) != nil {
		return "", 0
	}
	wait = min(time.Duration(max(r.WaitMS, 0))*time.Millisecond, api.MaxKeepAliveWait)
	switch {
	case r.Cell != "":
		return "cell:" + r.Cell, wait
	case len(r.Path) > 1 && r.Path[0] == '/':
		return "prefix:" + api.Prefix(r.Path), wait
	}
	return "", wait
}

func (c *Client) pick(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ep, ok := c.preferred[key]; ok {
		return ep
	}
	ep := c.endpoints[c.next%len(c.endpoints)]
	c.preferred[key] = ep
	return ep
}

func (c *Client) prefer(key, ep string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.preferred[key] = ep
}

// rotate moves key off a failing endpoint to the next one in the list.
func (c *Client) rotate(key, failed string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.preferred[key]; ok && cur != failed {
		return // someone already moved it
	}
	i := 0
	for j, ep := range c.endpoints {
		if ep == failed {
			i = j + 1
			break
		}
	}
	if i == 0 {
		i = c.next + 1 // failed was a hint outside the list
	}
	c.next = i
	c.preferred[key] = c.endpoints[i%len(c.endpoints)]
}

// sleep pauses before the next attempt; false if ctx ended first.
func (c *Client) sleep(ctx context.Context, failures int) bool {
	d := c.MinBackoff << min(failures-1, 20)
	if d > c.MaxBackoff || d <= 0 {
		d = c.MaxBackoff
	}
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
