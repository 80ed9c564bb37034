package proxy

// The etcd gateway's backend (proxy/etcdgw, docs/etcd.md): the gateway
// is a client of its own proxy. Each API request it makes goes to this
// proxy's own handler over an in-memory listener, with the etcd
// client's API token as its bearer token, so the proxy and the lockds
// authorize it exactly as an SDK client's request. The gRPC server
// checked the client's certificate (mutual TLS): requests on the
// in-memory listener skip only that check, never the token's.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/proxy/etcdgw"
	"github.com/lockservice/lockd/sdk"
)

// etcdCallBudget bounds one API request of the gateway when its context
// has no deadline: the SDK's attempt budget plus the longest long poll
// (a change feed read holds up to api.MaxChangesWaitMS).
const etcdCallBudget = 2*sdk.DefaultRequestTimeout + api.MaxChangesWaitMS*time.Millisecond

// etcdBackend implements etcdgw.Backend on a proxy.
type etcdBackend struct {
	p   *Proxy
	ln  *fasthttputil.InmemoryListener
	srv *fasthttp.Server
	cl  *fasthttp.Client
	// peerCl asks other proxies' status (PeerEtcdURL).
	peerCl *fasthttp.Client
}

// newEtcdBackend serves p's handler, without the certificate check, on
// an in-memory listener.
func newEtcdBackend(p *Proxy) *etcdBackend {
	b := &etcdBackend{p: p, ln: fasthttputil.NewInmemoryListener()}
	b.srv = p.server()
	b.srv.Handler = p.handleInternal
	b.srv.ConnState = nil // the gateway's own connections are no clients of the proxy's
	b.cl = newEtcdClient(b.ln)
	b.peerCl = &fasthttp.Client{TLSConfig: p.cfg.UpstreamTLS, MaxConnsPerHost: 4, MaxIdleConnDuration: time.Minute,
		ReadTimeout: etcdCallBudget, WriteTimeout: etcdCallBudget, MaxResponseBodySize: maxPeerStatus}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := b.srv.Serve(b.ln); err != nil {
			p.log.Error("etcd backend serve", "err", err)
		}
	}()
	return b
}

// etcdMaxAnswer bounds one answer the gateway reads from the proxy: the
// largest the lockds give (a range of api.MaxRangeBytes of values,
// base64 in JSON, with api.MaxRangeKeys nodes' metadata; a change read
// of api.MaxChangesPerRead changes), as the proxy's own upstream client
// takes. It was 4*api.MaxRequestBody (1 MiB): a range or change read
// past that failed as "outcome unknown", and a tenant writing a few
// large values wedged every watch of its prefix (attack review,
// session 34).
const etcdMaxAnswer = 64 << 20

// newEtcdClient is the gateway's client of the proxy's handler on ln.
func newEtcdClient(ln *fasthttputil.InmemoryListener) *fasthttp.Client {
	return &fasthttp.Client{
		Dial:                func(string) (net.Conn, error) { return ln.Dial() },
		MaxConnsPerHost:     api.MaxConnectionsPerProxy,
		MaxIdleConnDuration: time.Minute,
		ReadTimeout:         etcdCallBudget,
		WriteTimeout:        etcdCallBudget,
		// The gateway holds its own bounds on requests; answers are
		// bounded by the lockds' (etcdMaxAnswer).
		MaxResponseBodySize: etcdMaxAnswer,
	}
}

// etcdCloseGrace bounds how long closing the in-memory server waits for
// the gateway's requests in flight (the gateway stopped first).
const etcdCloseGrace = 5 * time.Second

// close stops the in-memory server (its shutdown closes the listener).
func (b *etcdBackend) close() error {
	b.cl.CloseIdleConnections()
	b.peerCl.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), etcdCloseGrace)
	defer cancel()
	err := b.srv.ShutdownWithContext(ctx)
	// Shutdown closes only the listeners Serve has taken: one whose Serve
	// had not yet begun would be served, and waited for, for ever.
	_ = b.ln.Close()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// Call sends one request through the proxy's handler with token. A
// refusal codec_too_old (the cell's log codec is not yet at what the
// request needs: a new cluster raises it within seconds of starting) was
// refused before anything was proposed, so it is sent again, every
// codecRetryStep for at most codecRetryRounds.
func (b *etcdBackend) Call(ctx context.Context, token, route string, req, resp any) error {
	err := b.call(ctx, token, route, req, resp)
	for i := 0; i < codecRetryRounds && api.CodeOf(err) == api.CodeCodecTooOld; i++ {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(codecRetryStep):
		}
		err = b.call(ctx, token, route, req, resp)
	}
	return err
}

// Resending a request its cell refused as codec_too_old: every
// codecRetryStep, at most codecRetryRounds times (5 s: a directory raises
// a new cluster's floor within about 2 s).
const (
	codecRetryStep   = 100 * time.Millisecond
	codecRetryRounds = 50
)

func (b *etcdBackend) call(ctx context.Context, token, route string, req, resp any) error {
	if mutant.On(mutant.EtcdAuth) {
		token = b.p.cfg.Token // the proxy's own credential, not the caller's
	}
	body, err := json.Marshal(req)
	if err != nil {
		return api.Errorf(api.CodeBadRequest, "encode %s: %v", route, err)
	}
	hreq, hresp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(hreq)
	defer fasthttp.ReleaseResponse(hresp)
	hreq.SetRequestURI("http://etcd-gateway" + route)
	hreq.Header.SetMethod(fasthttp.MethodPost)
	hreq.Header.SetContentType("application/json")
	if token != "" {
		hreq.Header.Set(api.HeaderAuth, "Bearer "+token)
	}
	hreq.SetBody(body)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(etcdCallBudget)
	}
	if err := b.cl.DoDeadline(hreq, hresp, deadline); err != nil {
		// Not an *api.Error: the request may or may not have applied.
		return fmt.Errorf("etcd gateway call %s: outcome unknown: %w", route, err)
	}
	return decodeAnswer(route, hresp.StatusCode(), hresp.Body(), resp)
}

// decodeAnswer decodes a 200's body into resp, and any other answer's
// api.ErrorResponse into its *api.Error.
func decodeAnswer(route string, code int, body []byte, resp any) error {
	if code != fasthttp.StatusOK {
		var er api.ErrorResponse
		if json.Unmarshal(body, &er) != nil || er.Error == nil || er.Error.Code == "" {
			return fmt.Errorf("etcd gateway call %s: HTTP %d without an error body: outcome unknown", route, code)
		}
		return er.Error
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(body, resp); err != nil {
		return fmt.Errorf("etcd gateway call %s: undecodable answer: %w", route, err)
	}
	return nil
}

// CallOwn sends a request with the proxy's own credentials to the cell
// of the request's root (or cell).
func (b *etcdBackend) CallOwn(ctx context.Context, route string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return api.Errorf(api.CodeBadRequest, "encode %s: %v", route, err)
	}
	var probe struct {
		Cell string `json:"cell"`
		Root string `json:"root"`
		Path string `json:"path"`
	}
	_ = json.Unmarshal(body, &probe)
	cell := probe.Cell
	if cell == "" {
		if cell, err = b.p.up.CellFor(firstOf(probe.Root, probe.Path)); err != nil {
			return err
		}
	}
	out, err := b.p.up.Forward(ctx, cell, route, body, sdk.ForwardOptions{Own: true, RetryUnsure: true})
	if err != nil {
		return err
	}
	if resp == nil {
		return nil
	}
	return json.Unmarshal(out, resp)
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Authorize authenticates a token as the proxy authenticates its clients.
func (b *etcdBackend) Authorize(ctx context.Context, token string) (etcdgw.Caller, error) {
	pr, err := b.p.authenticateToken(ctx, token)
	if err != nil {
		return nil, err
	}
	c := etcdCaller{pr: pr}
	if b.p.authRequired() {
		c.digest = api.TokenDigest(token)
	}
	return c, nil
}

// etcdCaller is a principal as the gateway sees it.
type etcdCaller struct {
	pr     principal
	digest string
}

func (c etcdCaller) Tenant() string                         { return c.pr.tenant }
func (c etcdCaller) Digest() string                         { return c.digest }
func (c etcdCaller) Allows(role api.Role, path string) bool { return c.pr.allows(role, path) }

// Prefix is path's served top-level prefix in the proxy's directory.
func (b *etcdBackend) Prefix(path string) (etcdgw.PrefixInfo, bool) {
	if api.ValidatePath(path) != nil {
		return etcdgw.PrefixInfo{}, false
	}
	pi, ok := b.p.up.Directory().Prefix(api.Prefix(path))
	if !ok {
		return etcdgw.PrefixInfo{}, false
	}
	return etcdgw.PrefixInfo{Prefix: pi.Prefix, Cell: pi.Cell, Epoch: pi.Epoch}, true
}

// Prefixes are every served top-level prefix.
func (b *etcdBackend) Prefixes() []string {
	d := b.p.up.Directory()
	out := make([]string, 0, len(d.Prefixes))
	for _, pi := range d.Prefixes {
		out = append(out, pi.Prefix)
	}
	return out
}

// Proxies are the lockproxies in the directory.
func (b *etcdBackend) Proxies() []api.ProxyInfo { return b.p.up.Directory().Proxies }

// maxPeerStatus bounds a peer proxy's status answer.
const maxPeerStatus = 1 << 20

// PeerEtcdURL asks proxy x's status (GET /v1/status, with this proxy's
// own token and, with TLS, its own certificate) where its gateway serves.
func (b *etcdBackend) PeerEtcdURL(ctx context.Context, x api.ProxyInfo) (string, error) {
	scheme := "http://"
	if b.p.cfg.UpstreamTLS != nil {
		scheme = "https://"
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("GET")
	req.SetRequestURI(scheme + x.APIAddr + api.RouteStatus)
	if b.p.cfg.Token != "" {
		req.Header.Set(api.HeaderAuth, "Bearer "+b.p.cfg.Token)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(etcdCallBudget)
	}
	if err := b.peerCl.DoDeadline(req, resp, deadline); err != nil {
		return "", err
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return "", fmt.Errorf("proxy %s status: HTTP %d", x.Name, resp.StatusCode())
	}
	var st api.ProxyStatus
	if err := json.Unmarshal(resp.Body(), &st); err != nil {
		return "", fmt.Errorf("proxy %s status: %w", x.Name, err)
	}
	return st.EtcdURL, nil
}

// Name is the proxy's name.
func (b *etcdBackend) Name() string { return b.p.cfg.Name }

// startEtcd starts the gateway when the proxy is configured with one.
func (p *Proxy) startEtcd(ctx context.Context) error {
	if p.cfg.EtcdListen == "" {
		return nil
	}
	b := newEtcdBackend(p)
	gw, err := etcdgw.Start(ctx, etcdgw.Config{Listen: p.cfg.EtcdListen, TLS: p.cfg.TLS, DefaultPrefix: p.cfg.EtcdDefaultPrefix,
		LockDelay: p.cfg.EtcdLockDelay, AuthRequired: p.authRequired(), PeerTLS: p.cfg.UpstreamTLS, Logger: p.log}, b)
	if err != nil {
		_ = b.close()
		return err
	}
	p.etcd, p.etcdBackend = gw, b
	u := etcdURL(p.cfg, gw.Addr())
	p.etcdURL.Store(&u)
	p.log.Info("serving etcd v3", "addr", gw.Addr(), "default_prefix", p.cfg.EtcdDefaultPrefix)
	return nil
}

// etcdURL is the URL clients and other gateways reach the gateway
// listening at addr by: cfg.EtcdAdvertise, else addr, its host taken
// from the proxy's advertised (or listen) address when addr listens on
// every address.
func etcdURL(cfg Config, addr string) string {
	scheme := "http://"
	if cfg.TLS != nil {
		scheme = "https://"
	}
	if cfg.EtcdAdvertise != "" {
		return scheme + cfg.EtcdAdvertise
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		adv := cfg.Advertise
		if adv == "" {
			adv = cfg.Listen
		}
		if h, _, err := net.SplitHostPort(adv); err == nil && h != "" {
			host = h
		}
	}
	return scheme + net.JoinHostPort(host, port)
}

// EtcdAddr is the etcd gateway's address ("" without one).
func (p *Proxy) EtcdAddr() string {
	if p.etcd == nil {
		return ""
	}
	return p.etcd.Addr()
}

// closeEtcd stops the gateway, then its backend (once: a second Close
// finds nothing).
func (p *Proxy) closeEtcd() error {
	gw, b := p.etcd, p.etcdBackend
	if gw == nil {
		return nil
	}
	p.etcd, p.etcdBackend = nil, nil
	return errors.Join(gw.Close(), b.close())
}
