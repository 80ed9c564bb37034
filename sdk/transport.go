package sdk

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockservice/lockd/internal/mutant"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
)

// transport is one HTTP connection pool: a fasthttp.HostClient per endpoint,
// dialled through a tracking dialer so Close can interrupt requests that are
// still in flight. The client keeps two: one for bulk traffic and one for
// KeepAlives only, so a long-poll never queues behind (or in front of) the
// rest.
type transport struct {
	name     string
	auth     string // value of the Authorization header, "" for none
	maxConns int
	// tls, when set, is the mutual TLS every connection speaks (the
	// handshake is part of the dial: a failed one is a dialError, so the
	// request certainly was not sent); scheme is then https.
	tls    *tls.Config
	scheme string
	// netDial, when set, opens connections in place of a TCP dial
	// (Config.Dial).
	netDial DialFunc
	// life, when set, is told of every read from an endpoint and watches
	// attempts for a hung endpoint (liveness.go); shared by the client's
	// transports.
	life *liveness
	// probes: the transport of liveness's probes: a request never waits
	// for a free connection, and its dials are not an attempt's.
	probes bool

	mu     sync.Mutex
	hosts  map[string]*fasthttp.HostClient
	conns  map[*trackedConn]struct{}
	closed bool

	// stale counts requests refused on a pooled connection the server had
	// closed (errStaleConn): each was resent at once, on another pooled
	// connection or a fresh one.
	stale atomic.Uint64

	// wg counts requests whose caller gave up (context done) while the
	// fasthttp call was still running; Close waits for them.
	wg sync.WaitGroup
}

func newTransport(name, authToken string, maxConns int, tlsConfig *tls.Config, dial DialFunc) *transport {
	t := &transport{
		name:     name,
		maxConns: maxConns,
		hosts:    make(map[string]*fasthttp.HostClient),
		conns:    make(map[*trackedConn]struct{}),
		tls:      tlsConfig,
		scheme:   "http",
		netDial:  dial,
	}
	if tlsConfig != nil {
		t.scheme = "https"
	}
	if authToken != "" {
		t.auth = "Bearer " + authToken
	}
	return t
}

// errTransportClosed is returned by requests on a closed transport.
var errTransportClosed = errors.New("transport closed")

// dialError marks a failure to connect: the request was never sent, so it
// is safe to retry elsewhere even when the call is not idempotent.
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// errStaleConn fails a request whose pooled connection the server had
// already closed (peerGone) before the request was written: it never
// left, so it is safe to resend anywhere, even when not idempotent.
var errStaleConn = errors.New("the server had closed the pooled connection before the request was sent")

type trackedConn struct {
	net.Conn
	t    *transport
	once sync.Once
	// raw is the TCP or unix socket under Conn (under its TLS too), for
	// peerGone; nil when the dial gave any other kind of connection.
	raw syscall.RawConn
	// answered: a reply was read since the last request was written, so
	// the next write begins a request on a connection from the pool.
	answered atomic.Bool
	// life is the endpoint's liveness entry (nil: not tracked).
	life *endpointLife
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.answered.Store(true)
	if n > 0 {
		c.life.heardNow()
	}
	return n, err
}

// Write checks, before the first bytes of a request on a pooled
// connection, that the server has not closed it meanwhile.
func (c *trackedConn) Write(p []byte) (int, error) {
	if c.answered.Swap(false) && c.raw != nil && !mutant.On(mutant.PooledStale) && peerGone(c.raw) {
		c.t.stale.Add(1)
		return 0, errStaleConn
	}
	return c.Conn.Write(p)
}

func (c *trackedConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		c.t.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

func (t *transport) dial(addr string, timeout time.Duration) (net.Conn, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, &dialError{errTransportClosed}
	}
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	life := t.life.endpoint(addr)
	start := time.Now()
	opened := false
	if !t.probes {
		dialed := life.dialStart() // liveness waits for an attempt's dial
		defer func() { dialed(opened, time.Since(start)) }()
	}
	nc, raw, err := t.open(addr, start, timeout)
	if err != nil {
		return nil, err
	}
	opened = true
	c := &trackedConn{Conn: nc, t: t, raw: raw, life: life}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		_ = nc.Close()
		return nil, &dialError{errTransportClosed}
	}
	t.conns[c] = struct{}{}
	t.mu.Unlock()
	if t.tls != nil {
		return handshaken{c}, nil
	}
	return c, nil
}

// open connects to addr and, with TLS, completes the handshake, by
// start+timeout. raw is the TCP or unix socket under it, for peerGone (nil
// for any other kind of connection).
func (t *transport) open(addr string, start time.Time, timeout time.Duration) (net.Conn, syscall.RawConn, error) {
	nc, err := t.connect(addr, timeout)
	if err != nil {
		return nil, nil, &dialError{err}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	var raw syscall.RawConn // peerGone peeks at sockets only
	switch sc := nc.(type) {
	case *net.TCPConn:
		raw, _ = sc.SyscallConn()
	case *net.UnixConn:
		raw, _ = sc.SyscallConn()
	}
	if t.tls == nil {
		return nc, raw, nil
	}
	cfg := t.tls.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(nc, cfg)
	_ = tc.SetDeadline(start.Add(timeout))
	if err := tc.Handshake(); err != nil {
		_ = nc.Close()
		return nil, nil, &dialError{fmt.Errorf("TLS handshake with %s: %w", addr, err)}
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, raw, nil
}

// connect opens a connection to addr within timeout: through the
// configured dial if any, else over TCP.
func (t *transport) connect(addr string, timeout time.Duration) (net.Conn, error) {
	if t.netDial == nil {
		return net.DialTimeout("tcp", addr, timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return t.netDial(ctx, "tcp", addr)
}

// handshaken is a TLS connection whose handshake the dial did: fasthttp
// takes a connection with a Handshake method for TLS already, and must
// not wrap it in a second TLS layer.
type handshaken struct{ *trackedConn }

func (handshaken) Handshake() error { return nil }

func (t *transport) host(addr string) (*fasthttp.HostClient, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, &dialError{errTransportClosed}
	}
	hc := t.hosts[addr]
	if hc == nil {
		hc = &fasthttp.HostClient{
			Addr:                      addr,
			Name:                      "lockd-sdk",
			IsTLS:                     t.tls != nil, // the dial did the handshake
			DialTimeout:               t.dial,
			MaxConns:                  t.maxConns,
			MaxConnWaitTimeout:        t.connWait(), // queue for a connection rather than fail at once
			MaxIdleConnDuration:       idleConnTimeout,
			MaxIdemponentCallAttempts: 1, // the SDK has one retry loop: do
			MaxResponseBodySize:       maxResponseBody,
		}
		t.hosts[addr] = hc
	}
	return hc, nil
}

// idleConnTimeout closes pooled connections idle this long, so the client
// drops them before a server's idle timeout is likely to. (A variable so
// tests can shorten the life of fasthttp's idle-connection janitor.)
var idleConnTimeout = 5 * time.Second

// connWait is the transport's MaxConnWaitTimeout: a probe does not queue.
func (t *transport) connWait() time.Duration {
	if t.probes {
		return 0
	}
	return maxConnWait
}

// maxConnWait is how long a request waits for a free connection when an
// endpoint's pool is at its limit.
const maxConnWait = time.Second

// maxResponseBody bounds a reply body (a children list may be large).
const maxResponseBody = 64 << 20

// exchange is one HTTP request to one endpoint.
type exchange struct {
	method string
	addr   string
	path   string
	body   []byte
	// contentType is body's ("" for JSON).
	contentType string
	timeout     time.Duration // bound on this attempt (capped by ctx's deadline)
	// waitLeader lets the replica hold the request for a usable leader, for
	// up to half the attempt (so a held request never times out here and
	// turns a write that was never applied into an unknown outcome).
	waitLeader  bool
	unreachable []string // the addresses the call failed to reach
	cell        string   // api.HeaderCell, if set
	dirIndex    uint64   // api.HeaderDirectoryIndex, sent with cell
	auth        authHeader
	trace       *Trace // asks for and records the server's stage timings; nil: none
	// watchHung abandons the exchange with errEndpointHung when its
	// endpoint is found hung while it waits (liveness.go).
	watchHung bool
	// resendable sends api.HeaderResendable: a lockproxy may resend it.
	resendable bool
}

// authHeader is an exchange's own Authorization header. A forwarded one
// (a lockproxy passing on its client's request) is sent exactly as the
// client sent it, and not at all if the client sent none: the transport's
// token is the proxy's own credential and is never lent to a client.
type authHeader struct {
	value   string
	forward bool
	client  string // api.HeaderClientAddr: the proxy's client's address ("" none)
}

// header is the Authorization value to send, given the transport's own.
func (a authHeader) header(own string) string {
	if a.forward && (a.value != "" || !mutant.On(mutant.LendToken)) {
		return a.value
	}
	return own
}

// roundTrip performs one exchange. It returns the status, a copy of the
// body and the time the request was handed to the connection (taken before
// sending, so it never postdates the server's receipt). ctx cancellation
// returns at once; the abandoned fasthttp call finishes in the background
// within the attempt timeout, or sooner when the transport closes.
func (t *transport) roundTrip(ctx context.Context, x exchange) (status int, body []byte, sent time.Time, err error) {
	hc, err := t.host(x.addr)
	if err != nil {
		return 0, nil, time.Time{}, err
	}
	deadline := time.Now().Add(x.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	t.prepare(req, x, deadline)

	var hung *hungWatch
	if x.watchHung && !mutant.On(mutant.SDKHungUnwatched) {
		hung = t.life.watch(x.addr, time.Until(deadline))
	}
	sent = time.Now()
	if ctx.Done() == nil && hung == nil {
		err = hc.DoDeadline(req, resp, deadline)
	} else {
		if err := ctx.Err(); err != nil {
			hung.stop()
			fasthttp.ReleaseRequest(req)
			fasthttp.ReleaseResponse(resp)
			return 0, nil, sent, err
		}
		done := make(chan error, 1)
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			done <- hc.DoDeadline(req, resp, deadline)
		}()
		// The goroutine owns req and resp until it ends: abandoned, they
		// are left to the garbage collector rather than returned to the
		// pool.
		select {
		case err = <-done:
			hung.stop()
		case <-ctx.Done():
			hung.stop()
			return 0, nil, sent, ctx.Err()
		case <-hung.C():
			return 0, nil, sent, errEndpointHung
		}
	}
	if err == nil {
		status = resp.StatusCode()
		body = append([]byte(nil), resp.Body()...)
		if x.trace != nil {
			x.trace.exchanged(sent, resp.Header.Peek(api.HeaderServerTiming))
		}
	}
	fasthttp.ReleaseRequest(req)
	fasthttp.ReleaseResponse(resp)
	return status, body, sent, err
}

// prepare writes exchange x's method, address, headers and body into
// req; a hold for a leader is bounded by deadline.
func (t *transport) prepare(req *fasthttp.Request, x exchange, deadline time.Time) {
	req.Header.SetMethod(x.method)
	req.SetRequestURI(t.scheme + "://" + x.addr + x.path)
	if h := x.auth.header(t.auth); h != "" {
		req.Header.Set("Authorization", h)
	}
	if x.auth.client != "" {
		req.Header.Set(api.HeaderClientAddr, x.auth.client)
	}
	if x.body != nil {
		ct := x.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.SetContentType(ct)
		req.SetBodyRaw(x.body)
	}
	if x.cell != "" {
		req.Header.Set(api.HeaderCell, x.cell)
		if x.dirIndex > 0 {
			var b [20]byte
			req.Header.SetBytesV(api.HeaderDirectoryIndex, strconv.AppendUint(b[:0], x.dirIndex, 10))
		}
	}
	if x.trace != nil {
		req.Header.Set(api.HeaderTrace, "1")
	}
	if x.resendable {
		req.Header.Set(api.HeaderResendable, "1")
	}
	if t.probes {
		req.SetConnectionClose() // a probe's connection is its own (probeHealth)
	}
	if x.waitLeader {
		if hold := min(time.Until(deadline)/2, api.MaxLeaderWait); hold >= time.Millisecond {
			req.Header.Set(api.HeaderWaitLeaderMS, strconv.FormatInt(hold.Milliseconds(), 10))
			if len(x.unreachable) > 0 {
				req.Header.Set(api.HeaderUnreachable, strings.Join(x.unreachable, ","))
			}
		}
	}
}

// close refuses new requests, closes every connection (failing requests in
// flight) and waits for abandoned calls to finish.
func (t *transport) close() {
	t.mu.Lock()
	t.closed = true
	conns := make([]*trackedConn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	hosts := t.hosts
	t.hosts = map[string]*fasthttp.HostClient{}
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	for _, hc := range hosts {
		hc.CloseIdleConnections()
	}
	t.wg.Wait()
}
