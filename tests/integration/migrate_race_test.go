package integration_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// raceKeys is how many keys the racing-migration test moves, all right
// under the prefix (as a new user would put them): every move copies
// several export pages, and each page's parent is the root.
const raceKeys = 10_000

// fillPrefix writes n keys prefix/kNNNNN with 16 writers.
func fillPrefix(t *testing.T, cl *sdk.Client, prefix string, n int) {
	t.Helper()
	ctx, cancel := ctxFor(3 * time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				if _, err := cl.Put(ctx, raceKey(prefix, i), []byte(fmt.Sprint(i)), sdk.MakeParents()); err != nil {
					errs <- fmt.Errorf("put %s: %w", raceKey(prefix, i), err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func raceKey(prefix string, i int) string {
	return fmt.Sprintf("%s/k%05d", prefix, i)
}

// countKeys counts the keys fillPrefix wrote that are still there, with
// their values.
func countKeys(t *testing.T, cl *sdk.Client, prefix string, n int) int {
	t.Helper()
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	have := map[string]bool{}
	kids, _, err := cl.Children(ctx, prefix)
	must(t, err)
	for _, k := range kids {
		have[prefix+"/"+k] = true
	}
	got := 0
	for i := 0; i < n; i++ {
		if have[raceKey(prefix, i)] {
			got++
		}
	}
	return got
}

// TestMigrationRaceLosesNothing (issue 23, finding 1): two drivers move
// one prefix to the same cell, three rounds between cells: the second
// starts 30 ms, then 90 ms after the first, and in the last round when
// the first has copied 60 % of the keys (before the fix that round lost
// the copy's middle pages: the second driver's first page emptied the
// copy, the first completed it with its later pages and committed, and
// the second's pages were then taken as "complete already"). Exactly one
// driver moves it each round (the other is refused,
// migration_in_progress), and every key survives every round.
func TestMigrationRaceLosesNothing(t *testing.T) {
	t.Parallel()
	c, admin := manyCells(t)
	ctx, cancel := ctxFor(10 * time.Minute)
	defer cancel()
	_, err := admin.AssignPrefix(ctx, "/bulk", "demo")
	must(t, err)
	start := time.Now()
	fillPrefix(t, admin, "/bulk", raceKeys)
	t.Logf("wrote %d keys under /bulk in %v", raceKeys, time.Since(start).Round(time.Millisecond))
	drivers := [2]*sdk.Client{newSDKClient(t, c), newSDKClient(t, c)}
	rounds := []struct {
		to  string
		gap time.Duration // 0: when the first driver has copied 60 %
	}{{"cell3", 30 * time.Millisecond}, {"payments", 90 * time.Millisecond}, {"demo", 0}}
	for round, r := range rounds {
		to, gap := r.to, r.gap
		var wg sync.WaitGroup
		var errs [2]error
		var took [2]time.Duration
		midCopy := make(chan struct{})
		var once sync.Once
		progress := func(p sdk.MoveProgress) {
			if p.Step == "copying" && p.Nodes >= raceKeys*6/10 {
				once.Do(func() { close(midCopy) })
			}
		}
		for i, d := range drivers {
			wg.Add(1)
			go func(i int, d *sdk.Client) {
				defer wg.Done()
				var prog func(sdk.MoveProgress)
				if i == 1 {
					if gap > 0 {
						time.Sleep(gap)
					} else {
						select {
						case <-midCopy:
						case <-time.After(30 * time.Second):
						}
					}
				} else {
					prog = progress
				}
				t0 := time.Now()
				_, errs[i] = d.MovePrefix(ctx, "/bulk", to, prog)
				took[i] = time.Since(t0)
			}(i, d)
		}
		wg.Wait()
		ok, refused := 0, 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
			case api.CodeOf(err) == api.CodeMigrationInProgress:
				refused++
			}
			t.Logf("round %d to %s: driver %d (the second starts %v later; 0: mid-copy) after %v: %v", round+1, to, i, gap, took[i].Round(time.Millisecond), err)
		}
		must(t, admin.RefreshDirectory(ctx))
		pi, _ := admin.Directory().Prefix("/bulk")
		if pi.Migration != nil {
			t.Fatalf("round %d: a migration is left in flight: %+v", round+1, *pi.Migration)
		}
		oneOwner(t, c, admin, "/bulk", to)
		got := countKeys(t, admin, "/bulk", raceKeys)
		t.Logf("round %d to %s: %d of %d keys there, %d lost; %d driver(s) done, %d refused as a second driver", round+1, to, got, raceKeys, raceKeys-got, ok, refused)
		if got != raceKeys {
			t.Errorf("round %d: %d of %d keys lost", round+1, raceKeys-got, raceKeys)
		}
		if ok != 1 || refused != 1 {
			t.Errorf("round %d: %d drivers moved /bulk and %d were refused as a second driver: want exactly one of each", round+1, ok, refused)
		}
	}
}
