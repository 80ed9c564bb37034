package sdk

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"github.com/lockservice/lockd/api"
)

// Config configures a Client.
type Config struct {
	// Endpoints are API addresses ("host:port") of any lockd processes; the
	// client loads the directory from the first that answers and learns
	// every cell's replicas from it.
	Endpoints []string
	// AuthToken, if set, is sent as "Authorization: Bearer <token>" on
	// every request.
	AuthToken string
	// TLS, if set, makes every connection mutual TLS: the client's
	// certificate, and the CA the servers' must be signed by
	// (Certificates and RootCAs). Required against a cluster started with
	// --tls-cert/--tls-key/--tls-ca.
	TLS *tls.Config
	// Lease is the session lease to ask for; 0 takes the cell's default
	// (api.DefaultLease). The cell clamps it to [api.MinLease, api.MaxLease].
	Lease time.Duration
	// Dial, if set, opens the client's connections in place of a TCP
	// dial: an in-memory network in tests (tests/fake), or a network of
	// one's own. Its context carries the dial timeout; network is "tcp".
	// TLS, if set, runs over the connection it returns. An error is a
	// failed dial (the request was not sent); one wrapping
	// syscall.ECONNREFUSED means nothing listens at addr (NoClusterAfter).
	Dial DialFunc
	// Logger receives the client's diagnostics; nil discards them.
	Logger *slog.Logger
	// RequestTimeout bounds one attempt of a call (one HTTP exchange with
	// one replica); the call as a whole is bounded by its context. 0 means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// HungAfter is how long an attempt may wait with nothing read from its
	// endpoint before the client probes the endpoint (GET /healthz), and
	// how long the probe has to answer, plus what a connection there
	// takes to open: a request sent to a process that stopped without
	// closing its connections (its machine gone, the process paused) is
	// then abandoned after about twice this, not after RequestTimeout,
	// and tried on another replica. Only calls that may be
	// resent (reads, writes under a session's request id) are watched,
	// never a KeepAlive's long poll. 0 means DefaultHungAfter (750 ms); a
	// negative value turns the watch off.
	HungAfter time.Duration
	// NoClusterAfter, if set, makes New give up when every endpoint has
	// refused its connections for this long (nothing listens there: no
	// cluster running, or wrong addresses) with ErrNoCluster, instead of
	// retrying for the whole context. Refusals only: a timeout or a
	// leader election in progress is retried as always. For tools
	// (lockctl); a service that starts before its cluster leaves it 0.
	NoClusterAfter time.Duration
	// Grace is how long a session in jeopardy keeps trying every endpoint
	// before the client gives it up and reports SessionExpired. 0 means
	// api.DefaultGrace (45 s, Chubby's default).
	Grace time.Duration
	// NoCache turns the client cache off: Get always asks the cell, and
	// sessions are opened without declaring that they cache (a new leader
	// then never waits for them before a change). By default a Get on a
	// cell where the client has a session is cached until the leader
	// invalidates it (see Client.Get).
	NoCache bool
	// Direct sends every call to the cells' replicas even when the
	// directory lists lockproxies. By default a client whose directory
	// lists proxies sends everything through them (each client starts at
	// a random one and moves to the next when it fails): a proxy renews
	// its clients' sessions in one batch per cell and second, so the
	// cells see one KeepAlive per proxy instead of one per client. Set it
	// for tools that must reach a cell with every proxy down.
	Direct bool
	// Gate, if set, holds back the acknowledgement of invalidations and
	// of a new leader's epoch until it says so: a lockproxy's shared
	// cache must first pass them on to its own clients. Applications
	// leave it nil.
	Gate AckGate
	// JSONKeepAlives sends KeepAlives (and a lockproxy's batches) in
	// JSON. By default they go in the compact binary encoding
	// (api.ContentTypeWire), and an endpoint that refuses it (a server
	// older than it) gets JSON from then on without this.
	JSONKeepAlives bool
}

// DialFunc opens a connection to addr on network (Config.Dial).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// AckGate lets a client hold back acknowledgements its cells wait for.
// Its methods are called with the session's lock held: they must not call
// into the client, and must return at once.
type AckGate interface {
	// Invalidated: the cell invalidated paths in the session's cache (nil:
	// every path, after a resync). The session acknowledges them once the
	// channel returned is closed (nil: at once).
	Invalidated(cell string, paths []string) <-chan struct{}
	// FailedOver: the cell has a new leader (epoch). The session
	// acknowledges the epoch, which the new leader waits for before it
	// changes a node the session may cache, once the channel is closed.
	FailedOver(cell string, epoch uint64) <-chan struct{}
}

// graceFor is a session's grace: Config.Grace if set, else the one its
// cell gives (graceMS, a cell across regions), else the default scaled to
// the lease (45 s for the default 12 s lease, never less).
func (cfg Config) graceFor(lease time.Duration, graceMS int64) time.Duration {
	switch {
	case cfg.Grace > 0:
		return cfg.Grace
	case graceMS > 0:
		return time.Duration(graceMS) * time.Millisecond
	}
	return max(api.DefaultGrace, time.Duration(float64(api.DefaultGrace)*float64(lease)/float64(api.DefaultLease)))
}

// keepAliveWait is a session's KeepAlive long-poll: the cell's interval
// (keepAliveMS) if it gives one, else a third of the lease.
func keepAliveWait(lease time.Duration, keepAliveMS int64) time.Duration {
	w := lease / 3
	if keepAliveMS > 0 {
		w = min(w, time.Duration(keepAliveMS)*time.Millisecond)
	}
	return min(w, api.MaxKeepAliveWait)
}

// DriftMargin is how much earlier than the cell the client assumes its lease
// ends, for clock-rate differences between the client and the cell: 2 % of
// the lease (240 ms of a 12 s lease), far above the drift of any working
// clock.
func DriftMargin(lease time.Duration) time.Duration { return lease / 50 }

// DefaultRequestTimeout is the attempt timeout when Config.RequestTimeout is 0.
const DefaultRequestTimeout = 5 * time.Second

const (
	// bulkMaxConns bounds connections per endpoint for ordinary calls; it
	// covers a full request window of one session.
	bulkMaxConns = 512
	// keepAliveMaxConns bounds KeepAlive connections per endpoint: one
	// long-poll per session (one session per cell, and a process may host
	// several cells), plus slack for abandoned ones finishing.
	keepAliveMaxConns = 64
	// maxProbeConns bounds the health probes' connections per endpoint
	// (liveness.go: one probe at a time per endpoint; one more for a
	// connection the endpoint has not closed yet).
	maxProbeConns = 2
)

func (cfg Config) hungAfter() time.Duration {
	switch {
	case cfg.HungAfter < 0:
		return 0
	case cfg.HungAfter == 0:
		return DefaultHungAfter
	}
	return cfg.HungAfter
}

func (cfg Config) requestTimeout() time.Duration {
	if cfg.RequestTimeout > 0 {
		return cfg.RequestTimeout
	}
	return DefaultRequestTimeout
}

func (cfg Config) logger() *slog.Logger {
	if cfg.Logger != nil {
		return cfg.Logger
	}
	return slog.New(slog.DiscardHandler)
}
