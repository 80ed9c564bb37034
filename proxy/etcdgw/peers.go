package etcdgw

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Peers (docs/etcd.md, "Several gateways"): the other lockproxies that
// serve etcd. The directory lists every proxy (Backend.Proxies); each
// proxy's status says where its gateway serves (Backend.PeerEtcdURL),
// looked up when needed and kept peerTTL (a proxy that serves none:
// peerMissTTL). MemberList lists them, and a request about a lease
// another gateway granted goes to that gateway (forward.go): an etcd
// client given several endpoints spreads its calls over them, so its
// Grant, KeepAlive and Put with the lease may each land on a different
// gateway. Peers are kept by proxy name: a peer gone from the directory,
// or whose URL changed, has its connection closed.

// Bounds of the peers.
const (
	// MaxPeers bounds the peers kept (URLs and connections) and listed
	// by MemberList; a lease's gateway is found among every proxy.
	MaxPeers = 64
	// peerTTL is how long a peer's etcd URL is used before it is looked
	// up again; peerMissTTL how long "serves none" (or unreachable) is.
	peerTTL     = 10 * time.Second
	peerMissTTL = 2 * time.Second
	// peerLookupTimeout bounds one lookup of a peer's URL.
	peerLookupTimeout = 2 * time.Second
	// peerReadyTimeout bounds a call's wait for its connection to a peer
	// to be ready (a peer just restarted is reconnected to within
	// peerReconnectMax).
	peerReadyTimeout = 3 * time.Second
	peerReconnectMax = time.Second
)

// peers are the other gateways: their URLs and connections, by name.
type peers struct {
	g      *Gateway
	mu     sync.Mutex
	by     map[string]*peer // proxy name -> the peer, at most MaxPeers
	closed bool
}

// peer is one other gateway: its URL ("" if it serves none or could
// not be asked), when that was learned, and a connection to it.
type peer struct {
	url  string
	at   time.Time
	conn *grpc.ClientConn
}

func newPeers(g *Gateway) *peers { return &peers{g: g, by: map[string]*peer{}} }

// others are the proxies in the directory but this one; it forgets the
// peers no longer there.
func (p *peers) others() []api.ProxyInfo {
	self := p.g.be.Name()
	var out []api.ProxyInfo
	in := map[string]bool{}
	for _, x := range p.g.be.Proxies() {
		if x.Name != self {
			out = append(out, x)
			in[x.Name] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, x := range p.by {
		if !in[name] {
			x.drop()
			delete(p.by, name)
		}
	}
	return out
}

// drop closes x's connection.
func (x *peer) drop() {
	if x.conn != nil {
		_ = x.conn.Close()
		x.conn = nil
	}
}

// url is proxy x's gateway URL ("" if it serves none or cannot be
// asked), looked up when not known for peerTTL (peerMissTTL for "").
func (p *peers) url(ctx context.Context, x api.ProxyInfo) string {
	now := time.Now()
	p.mu.Lock()
	e := p.by[x.Name]
	if e != nil && (now.Sub(e.at) < peerTTL && e.url != "" || now.Sub(e.at) < peerMissTTL) {
		p.mu.Unlock()
		return e.url
	}
	p.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, peerLookupTimeout)
	defer cancel()
	got, err := p.g.be.PeerEtcdURL(lctx, x)
	if err != nil {
		p.g.log.Debug("etcd peer lookup failed", "proxy", x.Name, "err", err)
		if e != nil && e.url != "" {
			got = e.url // the last one known, until it answers again
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return got
	}
	e = p.by[x.Name]
	switch {
	case e == nil && len(p.by) >= MaxPeers:
		return got
	case e == nil:
		e = &peer{}
		p.by[x.Name] = e
	case e.url != got:
		e.drop() // it moved: a connection to the old address is no use
	}
	e.url, e.at = got, now
	return got
}

// all are every peer that serves etcd (at most MaxPeers) with its URL,
// looked up at once.
func (p *peers) all(ctx context.Context) map[string]string {
	others := p.others()
	if len(others) > MaxPeers {
		others = others[:MaxPeers]
	}
	out := make(map[string]string, len(others))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, x := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if u := p.url(ctx, x); u != "" {
				mu.Lock()
				out[x.Name] = u
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// errNoPeer: no proxy of the directory has a lease's tag; errPeerDown:
// the one that has it cannot be reached now.
var (
	errNoPeer   = errors.New("no gateway known by the lease's tag")
	errPeerDown = errors.New("the gateway that granted the lease cannot be reached")
)

// byTag are connections to the gateways whose lease tag is tag (two
// proxies may share one: each is asked in turn). errNoPeer if no proxy
// of the directory has it; errPeerDown if none that has it can be
// reached.
func (p *peers) byTag(ctx context.Context, tag uint16) ([]*grpc.ClientConn, error) {
	var found []api.ProxyInfo
	for _, x := range p.others() {
		if leaseTag(x.Name) == tag {
			found = append(found, x)
		}
	}
	if len(found) == 0 {
		return nil, errNoPeer
	}
	var conns []*grpc.ClientConn
	for _, x := range found {
		if c, err := p.conn(ctx, x); err == nil {
			conns = append(conns, c)
		}
	}
	if len(conns) == 0 {
		return nil, errPeerDown
	}
	return conns, nil
}

// conn is a connection to proxy x's gateway (kept with it), or
// errPeerDown if it serves none or cannot be asked.
func (p *peers) conn(ctx context.Context, x api.ProxyInfo) (*grpc.ClientConn, error) {
	u := p.url(ctx, x)
	if u == "" {
		return nil, errPeerDown
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.by[x.Name]
	if p.closed || e == nil || e.url != u {
		return nil, errPeerDown
	}
	if e.conn == nil {
		c, err := grpc.NewClient(strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://"), p.dialOptions(u)...)
		if err != nil {
			return nil, errPeerDown
		}
		e.conn = c
	}
	return e.conn, nil
}

// ready waits, at most peerReadyTimeout, for c to be ready to carry a
// call: false if it is not (the peer is down, or not yet back).
func ready(ctx context.Context, c *grpc.ClientConn) bool {
	wctx, cancel := context.WithTimeout(ctx, peerReadyTimeout)
	defer cancel()
	for {
		st := c.GetState()
		switch st {
		case connectivity.Ready:
			return true
		case connectivity.Idle:
			c.Connect()
		}
		if !c.WaitForStateChange(wctx, st) {
			return false
		}
	}
}

// dialOptions connect to the gateway at url: its TLS (the proxy's own
// client certificate) or none, and keepalives that notice a peer gone
// silent (within the gateway's enforcement policy).
func (p *peers) dialOptions(url string) []grpc.DialOption {
	creds := insecure.NewCredentials()
	if strings.HasPrefix(url, "https://") {
		cfg := p.g.cfg.PeerTLS
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(cfg)
	}
	bo := backoff.DefaultConfig
	bo.MaxDelay = peerReconnectMax // a restarted peer is back within a second, not gRPC's two minutes
	return []grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: peerReadyTimeout}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true})}
}

// close closes every connection; none is made after.
func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for name, x := range p.by {
		x.drop()
		delete(p.by, name)
	}
}
