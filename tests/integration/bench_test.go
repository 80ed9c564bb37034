package integration_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/tests/cluster"
)

// The benchmarks share one five-replica cluster at production timing
// (--rtt-ms 100, lease 12 s), started by the first benchmark that runs and
// stopped by TestMain, so `go test -run=X -bench=.` starts exactly one
// cluster and plain `go test` starts none.
var (
	benchOnce    sync.Once
	benchCluster *cluster.Cluster
	benchClient  *cluster.Client
	benchErr     error
	benchRun     atomic.Uint64 // distinguishes the runs of one benchmark
)

func benchSetup(b *testing.B) (*cluster.Cluster, *cluster.Client) {
	b.Helper()
	benchOnce.Do(func() {
		benchCluster, benchErr = cluster.New(cluster.Options{RTTMillisecond: 100, Lease: 12 * time.Second})
		if benchErr != nil {
			if benchCluster != nil {
				fmt.Fprintln(os.Stderr, benchCluster.LogTails(40))
			}
			return
		}
		benchClient = benchCluster.NewClient()
	})
	if benchErr != nil {
		b.Fatalf("bench cluster: %v", benchErr)
	}
	if _, err := benchCluster.WaitLeaders(30 * time.Second); err != nil {
		b.Fatal(err)
	}
	return benchCluster, benchClient
}

func stopBenchCluster() {
	if benchClient != nil {
		benchClient.Close()
	}
	if benchCluster != nil {
		benchCluster.Close()
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkCreateDeleteEphemeralSequential: one session, one op at a time:
// create an ephemeral sequential node, delete it. Reports the p50 and p99
// of the create+delete round trip.
func BenchmarkCreateDeleteEphemeralSequential(b *testing.B) {
	_, cl := benchSetup(b)
	s, err := tryOpenSession(cl, "demo", 12*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	s.keepAlive(4 * time.Second)
	defer func() { _ = s.close() }()
	dir := fmt.Sprintf("/demo/bench/ces-%d", benchRun.Add(1))
	mustDo(b, cl, api.RoutePut, api.PutRequest{Path: dir, MakeParents: true}, nil)
	op := func() error {
		var cr api.CreateResponse
		if err := do(cl, api.RouteCreate, api.CreateRequest{WriteHeader: s.header(), Path: dir + "/n-", Ephemeral: true, Sequential: true}, &cr); err != nil {
			return err
		}
		return do(cl, api.RouteDelete, api.DeleteRequest{WriteHeader: s.header(), Path: cr.Node.Path}, nil)
	}
	for i := 0; i < 10; i++ { // warm up: connections, leader routing
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

// BenchmarkConcurrentWrites64: 64 goroutines put distinct keys until b.N
// writes are committed. Reports committed writes per second.
func BenchmarkConcurrentWrites64(b *testing.B) {
	const workers = 64
	_, cl := benchSetup(b)
	dir := fmt.Sprintf("/demo/bench/cw-%d", benchRun.Add(1))
	mustDo(b, cl, api.RoutePut, api.PutRequest{Path: dir + "/warm", MakeParents: true}, nil)
	var (
		next      atomic.Int64
		committed atomic.Int64
		failed    atomic.Int64
		wg        sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) || ctx.Err() != nil {
					return
				}
				key := fmt.Sprintf("%s/k-%d", dir, i)
				if err := cl.Do(ctx, api.RoutePut, api.PutRequest{Path: key, Value: []byte(key)}, nil); err != nil {
					failed.Add(1)
					continue
				}
				committed.Add(1)
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d writes failed", n, b.N)
	}
	b.ReportMetric(float64(committed.Load())/elapsed.Seconds(), "writes/s")
}
