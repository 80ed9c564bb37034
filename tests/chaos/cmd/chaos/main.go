// Command chaos is `make chaos`: it runs the fault-injection suite of
// package chaos against a real five-replica cluster (production timing:
// 100 ms Raft ticks, 1–2 s elections, 12 s lease) for -duration on the
// schedule -seed gives, prints a readable summary and then exactly one JSON
// line, and exits 1 if any checker found a violation (2 if the run could
// not be carried out). Built with -tags lockd_mutants, LOCKD_MUTANT selects a
// mutant (internal/mutant) in it and in the lockds and lockproxies it
// builds and starts: `make chaos MUTANT=lockd_broken_X`.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lockservice/lockd/tests/chaos"
	"github.com/lockservice/lockd/tests/cluster"
)

func main() {
	var (
		seed     = flag.Int64("seed", 0, "schedule seed (0: random, printed)")
		duration = flag.Duration("duration", 5*time.Minute, "fault phase")
		short    = flag.Bool("short", false, "test timing (20 ms ticks, 5 s lease) and fewer clients")
		rounds   = flag.Int("rounds", 0, "stop after this many schedule rounds (0: run for -duration)")
		noPart   = flag.Bool("no-partitions", false, "run without network namespaces")
		noProxy  = flag.Bool("no-proxies", false, "run no lockproxy (half the workers send through two by default)")
		noHost   = flag.Bool("no-hostile", false, "run without the hostile tenant")
		hRate    = flag.Int("hostile-rate", 0, "the hostile tenant's credential attacks per second (0: 60 with -short, else 200)")
		dir      = flag.String("dir", "", "keep data and logs here")
		quiet    = flag.Bool("quiet", false, "no progress lines on stderr")
		snapN    = flag.Int("snapshot-entries", 0, "lockd --snapshot-entries (0: lockd's default)")
		delay    = flag.String("delay", "", "MIN-MAX: put every replica's Raft traffic through a relay adding MIN to MAX each way (a cell across regions, e.g. 50ms-100ms); the cells then run -cell-timing")
		timing   = flag.String("cell-timing", "", "the cells' own timing with -delay (default "+chaos.GlobalCellTiming+")")
		bulk     = flag.Int("side-bulk", 0, "nodes put under /side before the faults (0: 1200 with -short, else 3000)")
		only     = flag.String("only", os.Getenv("CHAOS_ONLY"), "comma-separated nemeses to run alone (e.g. race-move,restore-old; env CHAOS_ONLY)")
	)
	flag.Parse()
	if *seed == 0 {
		*seed = rand.Int64N(1<<31-1) + 1
	}
	logger := log.New(os.Stderr, "", log.Ltime|log.Lmicroseconds)
	logf := func(format string, args ...any) { logger.Printf(format, args...) }
	if *quiet {
		logf = func(string, ...any) {}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Printf("chaos: seed %d (SEED=%d reproduces the schedule), duration %v\n", *seed, *seed, *duration)
	if *only != "" {
		chaos.OnlyKinds = map[chaos.FaultKind]bool{}
		for _, k := range strings.Split(*only, ",") {
			chaos.OnlyKinds[chaos.FaultKind(strings.TrimSpace(k))] = true
		}
	}
	cfg := chaos.Config{
		Seed: *seed, Duration: *duration, Rounds: *rounds, Short: *short,
		NoPartitions: *noPart, NoProxies: *noProxy, NoHostile: *noHost, HostileRate: *hRate, Dir: *dir, Logf: logf, SnapshotEntries: *snapN,
		CellTiming: *timing, SideBulk: *bulk,
	}
	if *delay != "" {
		lo, hi, ok := strings.Cut(*delay, "-")
		minD, err1 := time.ParseDuration(lo)
		maxD, err2 := time.ParseDuration(hi)
		if !ok || err1 != nil || err2 != nil || minD < 0 || maxD < minD {
			fmt.Fprintf(os.Stderr, "chaos: -delay %q: want MIN-MAX like 50ms-100ms\n", *delay)
			os.Exit(2)
		}
		cfg.RaftDelay = cluster.Delay{Min: minD, Max: maxD}
	}
	rep, err := chaos.Run(ctx, cfg)
	cluster.Cleanup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		os.Exit(2)
	}
	fmt.Print(rep.Summary())
	fmt.Println(rep.JSON())
	if rep.Violations > 0 {
		os.Exit(1)
	}
}
