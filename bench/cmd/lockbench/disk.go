package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
)

// disk measures what every commit waits for: a small append and fdatasync
// to a file in dir, by one writer alone (a replica with a disk of its own,
// as in production) and by five at once (five replicas sharing one disk, as
// in a local cluster). Where the two differ, a local cluster's commit tails
// say more about the shared disk than about lockd.
func disk(ctx context.Context, e *env, dir string) ([]report.Result, error) {
	var out []report.Result
	for _, writers := range []int{1, 5} {
		rec := stats.NewRecorder(time.Now())
		start := time.Now()
		dctx, cancel := context.WithTimeout(ctx, e.duration)
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := appendSync(dctx, dir, rec); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		cancel()
		close(errs)
		if err := <-errs; err != nil {
			return out, err
		}
		out = append(out, report.Result{Scenario: "disk", Case: fmt.Sprintf("4 KiB append + fdatasync, %d writer(s) in %s", writers, dir),
			Params: map[string]string{"writers": strconv.Itoa(writers), "dir": dir}, Summary: rec.Summarise(time.Since(start))})
	}
	return out, nil
}

func appendSync(ctx context.Context, dir string, rec *stats.Recorder) error {
	f, err := os.CreateTemp(dir, "lockbench-disk-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	for i := 0; ctx.Err() == nil; i++ {
		if i%4096 == 0 { // a fresh 16 MiB segment: every write appends, as to a new WAL
			if err := f.Truncate(0); err != nil {
				return err
			}
			if _, err := f.Seek(0, 0); err != nil {
				return err
			}
		}
		t0 := time.Now()
		if _, err := f.Write(block); err != nil {
			return err
		}
		if err := fdatasync(f); err != nil {
			return err
		}
		rec.Add(time.Since(t0), time.Now())
	}
	return nil
}
