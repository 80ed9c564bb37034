package chaos

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/chaos/check"
)

// madeUpSecretSizes are the secrets the made-up KeepAlives claim: a
// plausible one, a long one, and one near the request body limit (hole 3
// used 250 KB).
var madeUpSecretSizes = []int{32, 4 << 10, 200 << 10}

// madeUpKeepAliveLoop sends KeepAlives through the proxies for sessions
// mallory never opened, with oversized secrets (hole 3), and the revoked
// tenant's KeepAlives for the session it opened before its revocation
// (hole 4); every one must be refused.
func (x *hostile) madeUpKeepAliveLoop(ctx context.Context) {
	if len(x.proxies) == 0 {
		return
	}
	r := x.e.rng("hostile-keepalive")
	for i := 0; i < hostileMaxRequests && ctx.Err() == nil; i++ {
		target := x.proxies[i%len(x.proxies)]
		if i%4 == 3 && x.revokedSession != nil {
			s := x.revokedSession
			all := x.targets()
			x.do(ctx, check.HostileReply{Kind: "cred-revoked", Op: "keepalive-revoked-session", Target: all[r.IntN(len(all))],
				Route: api.RouteSessionKeepAlive, Auth: "a revoked token", Expect: check.ExpectRefused}, http.MethodPost,
				jsonBody(api.KeepAliveRequest{Cell: cellName, Session: s.Session, Secret: s.Secret}), "Bearer "+x.revokedToken)
		} else {
			size := madeUpSecretSizes[i%len(madeUpSecretSizes)]
			req := api.KeepAliveRequest{Cell: cellName, Session: 1 + r.Uint64N(1<<20), Secret: strings.Repeat("m", size)}
			x.do(ctx, check.HostileReply{Kind: "keepalive-made-up", Op: "keepalive-" + strconv.Itoa(size), Target: target,
				Route: api.RouteSessionKeepAlive, Auth: "the reader's token", Expect: check.ExpectRefused}, http.MethodPost,
				jsonBody(req), "Bearer "+x.readerToken)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// hostileFigures are what the attacks cost the processes: the proxies'
// goroutines and memory (holes 3 and 6), and the size of a lockd's and a
// proxy's /metrics (hole 8), at the start and at most.
type hostileFigures struct {
	ProxyGoroutinesStart float64 `json:"proxy_goroutines_start"`
	ProxyGoroutinesMax   float64 `json:"proxy_goroutines_max"`
	ProxyRSSMBStart      float64 `json:"proxy_rss_mb_start"`
	ProxyRSSMBMax        float64 `json:"proxy_rss_mb_max"`
	LockdMetricsKBStart  float64 `json:"lockd_metrics_kb_start"`
	LockdMetricsKBMax    float64 `json:"lockd_metrics_kb_max"`
	ProxyMetricsKBStart  float64 `json:"proxy_metrics_kb_start"`
	ProxyMetricsKBMax    float64 `json:"proxy_metrics_kb_max"`
	// HandOvers and HandOversFailed are the lockds' planned leadership
	// hand-overs that moved and that did not, as sampled (handovers.go).
	HandOvers       float64 `json:"handovers"`
	HandOversFailed float64 `json:"handovers_failed"`
}

// figuresLoop samples the figures every few seconds.
func (x *hostile) figuresLoop(ctx context.Context) {
	for i := 0; i < hostileMaxRequests && ctx.Err() == nil; i++ {
		x.sampleFigures(ctx, i == 0)
		x.sampleHandOvers(ctx)
		sleepCtx(ctx, 5*time.Second)
	}
}

func (x *hostile) sampleFigures(ctx context.Context, first bool) {
	var f hostileFigures
	if st, b := x.send(ctx, x.lockds[0], http.MethodGet, api.RouteMetrics, nil, ""); st == http.StatusOK {
		f.LockdMetricsKBStart = float64(len(b)) / 1024
	}
	for _, p := range x.proxies {
		st, b := x.send(ctx, p, http.MethodGet, api.RouteMetrics, nil, "")
		if st != http.StatusOK {
			continue
		}
		f.ProxyMetricsKBStart = max(f.ProxyMetricsKBStart, float64(len(b))/1024)
		f.ProxyGoroutinesStart = max(f.ProxyGoroutinesStart, metricValue(b, "go_goroutines"))
		f.ProxyRSSMBStart = max(f.ProxyRSSMBStart, metricValue(b, "process_resident_memory_bytes")/(1<<20))
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	g := &x.figures
	if first {
		g.ProxyGoroutinesStart, g.ProxyRSSMBStart = f.ProxyGoroutinesStart, f.ProxyRSSMBStart
		g.LockdMetricsKBStart, g.ProxyMetricsKBStart = f.LockdMetricsKBStart, f.ProxyMetricsKBStart
	}
	g.ProxyGoroutinesMax = max(g.ProxyGoroutinesMax, f.ProxyGoroutinesStart)
	g.ProxyRSSMBMax = max(g.ProxyRSSMBMax, f.ProxyRSSMBStart)
	g.LockdMetricsKBMax = max(g.LockdMetricsKBMax, f.LockdMetricsKBStart)
	g.ProxyMetricsKBMax = max(g.ProxyMetricsKBMax, f.ProxyMetricsKBStart)
}

// metricValue is the value of an unlabelled metric in a Prometheus text
// exposition (0 if absent).
func metricValue(b []byte, name string) float64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
