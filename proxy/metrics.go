package proxy

import (
	"strconv"

	"github.com/lockservice/lockd/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the proxy's Prometheus series (documented in docs/design/proxy-and-cache.md).
type metrics struct {
	requests      *prometheus.CounterVec
	keepAlives    prometheus.Counter
	batches       *prometheus.CounterVec
	batchErrors   *prometheus.CounterVec
	batchSessions *prometheus.GaugeVec
	cacheHits     prometheus.Counter
	cacheMisses   prometheus.Counter
	invalidations prometheus.Counter
	clientWatches prometheus.Gauge
	sharedWatches prometheus.Gauge
	// grantLapses counts clients' cache grants that ran out with an
	// invalidation unacknowledged, by whether the lapse was held against
	// the client's tenant (held: the grant had at least
	// api.FairCacheAck left when the invalidation was queued, and it is
	// the client session's first).
	grantLapses *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry, p *Proxy) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lockproxy_requests_total",
			Help: "Client requests by route."}, []string{"route"}),
		keepAlives: prometheus.NewCounter(prometheus.CounterOpts{Name: "lockproxy_client_keepalives_total",
			Help: "KeepAlives received from clients (each ends here; the cells see batches)."}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lockproxy_keepalive_batches_total",
			Help: "KeepAlive batches sent to cells' leaders."}, []string{"cell"}),
		batchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lockproxy_keepalive_batch_errors_total",
			Help: "KeepAlive batches that failed (the next one renews again)."}, []string{"cell"}),
		batchSessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lockproxy_keepalive_batch_sessions",
			Help: "Sessions in the latest KeepAlive batch sent to the cell."}, []string{"cell"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{Name: "lockproxy_cache_hits_total",
			Help: "Clients' cached reads served from the proxy's shared cache."}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{Name: "lockproxy_cache_misses_total",
			Help: "Clients' cached reads the proxy sent to the cell."}),
		invalidations: prometheus.NewCounter(prometheus.CounterOpts{Name: "lockproxy_invalidations_sent_total",
			Help: "Invalidations passed on to clients the proxy served the value to."}),
		clientWatches: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lockproxy_client_watches",
			Help: "Watches the proxy's clients wait on (at most one per client session, path and kind)."}),
		sharedWatches: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lockproxy_shared_watches",
			Help: "Watches the proxy holds on its own sessions for its clients: one per path and kind."}),
		grantLapses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lockproxy_cache_grant_lapses_total",
			Help: "Clients' cache grants that ran out with an invalidation unacknowledged; held=true: counted against the client's tenant (at " + strconv.Itoa(api.MaxCacheMissesPerTenant) + " the tenant is served uncached on the cell)."}, []string{"held"}),
	}
	reg.MustRegister(m.requests, m.keepAlives, m.batches, m.batchErrors, m.batchSessions, m.cacheHits, m.cacheMisses, m.invalidations, m.clientWatches, m.sharedWatches, m.grantLapses,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lockproxy_clients", Help: "Open client connections."},
			func() float64 { return float64(p.openClients()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lockproxy_parked_keepalives", Help: "Clients' KeepAlives held with their connections parked, without a goroutine (park.go)."},
			func() float64 { return float64(p.parkedKeepAlives()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lockproxy_idle_conns", Help: "Client connections idle between two requests, held without a goroutine (internal/connpark)."},
			func() float64 { return float64(p.conns.IdleHeld()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockproxy_idle_parks_total", Help: "Times a client connection was parked idle."},
			func() float64 { return float64(p.conns.IdleParks()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockproxy_connections_refused_total", Help: "Client connections closed at accept: the proxy held its bound of open connections."},
			func() float64 {
				if p.limited == nil {
					return 0
				}
				return float64(p.limited.Refused.Load())
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "lockproxy_sessions", Help: "Client sessions this proxy renews."},
			func() float64 { return float64(p.Status().Sessions) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lockproxy_own_keepalives_total",
			Help: "KeepAlives of the proxy's own sessions (one per cell, holding its shared watches and cache), sent to the cells' leaders."},
			func() float64 { return float64(p.up.KeepAlivesSent()) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
