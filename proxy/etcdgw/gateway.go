// Package etcdgw serves etcd's v3 gRPC API at a lockproxy (docs/etcd.md):
// etcdctl, etcd's Go client and its concurrency package, and etcd
// clients in other languages run unchanged on the sharded, fenced
// service. Keys are paths, revisions are a cell's log index with the
// prefix's directory epoch in the high bits, a lease is a session on
// each cell its keys live on, and every request is authorized by the
// lockds with the caller's own API token (the etcd auth token).
package etcdgw

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/lockservice/lockd/api"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// Config configures a gateway.
type Config struct {
	// Listen is the gRPC address ("127.0.0.1:2379").
	Listen string
	// TLS, when set, is the server's configuration (mutual TLS: clients
	// present certificates the cluster's CA signed, as on the HTTP API).
	TLS *tls.Config
	// DefaultPrefix holds the keys that do not begin with "/" ("/etcd":
	// the key "foo" is the path /etcd/foo); "" refuses such keys.
	DefaultPrefix string
	// LockDelay is the lock-delay of locks taken through the Lock service
	// (0 to api.MaxLockDelay).
	LockDelay time.Duration
	// AuthRequired: every request needs an API token (the cluster
	// requires tokens); without one it answers Unauthenticated.
	AuthRequired bool
	// PeerTLS is the client configuration toward other gateways (mutual
	// TLS: the proxy's own certificate), nil for plain connections.
	PeerTLS *tls.Config
	Logger  *slog.Logger
}

// Gateway is one running etcd gateway.
type Gateway struct {
	cfg  Config
	be   Backend
	log  *slog.Logger
	keys keyspace
	// leases are the leases this gateway granted (lease_table.go).
	leases *leaseTable
	// changes is the change feed: watches and waiters (changes.go).
	changes *changeFeed
	// counts bound watch streams, observers and campaigners (counts.go).
	counts *tenantCounts
	// peers are the other gateways (peers.go); foreign the leases of
	// sessions they granted, as learned (forward_leases.go).
	peers   *peers
	foreign foreignLeases
	// memberID is this gateway's etcd member id: a hash of the proxy's
	// name, stable across restarts.
	memberID uint64

	srv *grpc.Server
	ln  net.Listener

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start listens on cfg.Listen and serves until Close.
func Start(ctx context.Context, cfg Config, be Backend) (*Gateway, error) {
	if be == nil {
		return nil, errors.New("etcdgw: no backend")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LockDelay < 0 || cfg.LockDelay > api.MaxLockDelay {
		return nil, fmt.Errorf("etcd lock-delay %v: 0 to %v (api.MaxLockDelay)", cfg.LockDelay, api.MaxLockDelay)
	}
	keys, err := newKeyspace(cfg.DefaultPrefix, be)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("etcd listen: %w", err)
	}
	ln = newLimitListener(ln, MaxConns) // conns.go
	g := &Gateway{cfg: cfg, be: be, log: cfg.Logger.With("etcd", ln.Addr().String()), keys: keys, memberID: memberID(be.Name()), ln: ln}
	g.ctx, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	g.leases = newLeaseTable(g)
	g.changes = newChangeFeed(g.ctx, be)
	g.counts = newTenantCounts()
	g.peers = newPeers(g)
	g.srv = grpc.NewServer(g.serverOptions()...)
	g.register(g.srv)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := g.srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			g.log.Warn("etcd gateway stopped serving", "err", err)
		}
	}()
	return g, nil
}

// serverOptions bound what one client can hold (streams, message size)
// and add the interceptors: a handler's panic answers Internal instead
// of ending the proxy (recover.go), and every call is authenticated.
func (g *Gateway) serverOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxRequestBytes),
		grpc.MaxConcurrentStreams(MaxStreamsPerConn),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.ConnectionTimeout(connTimes.handshake),                                         // conns.go
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: connTimes.idle}), // conns.go
		grpc.ChainUnaryInterceptor(g.unaryInterceptors()...),
		grpc.ChainStreamInterceptor(g.streamInterceptors()...),
	}
	if g.cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(requireClientCert(g.cfg.TLS)))) // tls.go
	}
	return opts
}

// Addr is the address the gateway listens on.
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// Close stops serving: open streams end, leases the gateway holds are
// left to their sessions' leases (they end unless renewed elsewhere).
func (g *Gateway) Close() error {
	g.cancel()
	stopped := make(chan struct{})
	go func() { g.srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(closeGrace):
		g.srv.Stop()
	}
	g.wg.Wait()
	g.changes.wg.Wait()
	g.peers.close()
	return nil
}

// closeGrace bounds how long Close waits for calls in flight.
const closeGrace = 2 * time.Second

// memberID is a stable nonzero member id for a proxy name.
func memberID(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	if id := h.Sum64(); id != 0 {
		return id
	}
	return 1
}
