package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
	"github.com/lockservice/lockd/sdk"
)

// migrateScenario moves a prefix holding n persistent nodes between two
// cells and back, while a writer keeps writing under it, and reports per
// move the time in all, the window in which the old cell refused writes
// before the new one served (from the seal to the new cell serving, as
// the migration saw it), and the longest a client write took meanwhile.
func migrateScenario(ctx context.Context, e *env, n, valueBytes int) ([]report.Result, error) {
	c, err := e.client(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cells := c.Directory().Cells
	if len(cells) < 2 {
		return nil, fmt.Errorf("migrate needs two cells; the cluster has %d", len(cells))
	}
	from, to := cells[0].Name, cells[1].Name
	prefix := "/mig" + e.run
	if _, err := c.AssignPrefix(ctx, prefix, from); err != nil {
		return nil, err
	}
	if err := fill(ctx, e, c, prefix, n, valueBytes); err != nil {
		return nil, err
	}
	var out []report.Result
	for trial, dst := range []string{to, from} {
		res, writes, err := moveUnderWrites(ctx, e, c, prefix, dst)
		if err != nil {
			return out, fmt.Errorf("move %d to %s: %w", trial+1, dst, err)
		}
		e.progress("%s → %s: %d nodes in %v, writes refused %v", res.From, res.To, res.Nodes, res.Total.Round(time.Millisecond), res.Refusing.Round(time.Millisecond))
		out = append(out, report.Result{Scenario: "migrate", Case: fmt.Sprintf("%d nodes %s → %s, writer running", res.Nodes, res.From, res.To),
			Params:  map[string]string{"nodes": strconv.Itoa(res.Nodes), "value_bytes": strconv.Itoa(valueBytes), "from": res.From, "to": res.To},
			Summary: writes,
			Extra: map[string]float64{"move_ms": ms(res.Total), "refusing_ms": ms(res.Refusing), "epoch": float64(res.Epoch),
				"max_write_ms": writes.Max}})
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fill writes n nodes of valueBytes under prefix with 32 writers.
func fill(ctx context.Context, e *env, c *sdk.Client, prefix string, n, valueBytes int) error {
	val := make([]byte, valueBytes)
	for i := range val {
		val[i] = byte('a' + i%26)
	}
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				if _, err := c.Put(ctx, fmt.Sprintf("%s/d%03d/k%06d", prefix, i%100, i), val, sdk.MakeParents()); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				if i%1000 == 0 {
					e.progress("filling %s: %d of %d nodes", prefix, i, n)
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// moveUnderWrites moves prefix to dst while one writer puts under it
// back to back, and returns the move and the writes' latencies.
func moveUnderWrites(ctx context.Context, e *env, c *sdk.Client, prefix, dst string) (sdk.MoveResult, stats.Summary, error) {
	wctx, stop := context.WithCancel(ctx)
	rec := stats.NewRecorder(time.Now())
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; wctx.Err() == nil; i++ {
			t := time.Now()
			_, err := c.Put(wctx, prefix+"/writer", []byte(strconv.Itoa(i)))
			switch {
			case err == nil:
				rec.Add(time.Since(t), time.Now())
			case wctx.Err() == nil:
				rec.Error()
				e.firstErr.CompareAndSwap(nil, &err)
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	res, err := c.MovePrefix(ctx, prefix, dst, nil)
	time.Sleep(500 * time.Millisecond)
	stop()
	<-done
	if err != nil {
		return res, stats.Summary{}, err
	}
	if res.Epoch < 2 || res.To != dst {
		return res, stats.Summary{}, fmt.Errorf("unexpected move result %+v", res)
	}
	return res, rec.Summarise(time.Since(start)), nil
}
