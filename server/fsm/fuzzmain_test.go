package fsm

import (
	"flag"
	"os"
	"testing"
)

// fuzzMinimizeLimit bounds how many executions the fuzz engine spends
// minimizing one input (-test.fuzzminimizetime; given on the command
// line, that wins). The engine minimizes every new interesting input
// before its worker fuzzes on, by default for up to 60 s, and counts
// those executions only when it is done; its subset pass tries on the
// order of n² candidates for an input of n bytes. FuzzApply's inputs run
// to hundreds of bytes at a few milliseconds an execution (up to 256
// entries applied three times, with snapshots), so the first interesting
// input of each worker took the whole budget of a `make test` fuzz run:
// 0 execs/s after about 3 s (issue 23, finding 12). No input was slow to
// apply: the slowest of the corpus and 200 random inputs took 22 ms.
// A failing input is still written to testdata in full; it is just
// minimized less.
const fuzzMinimizeLimit = "100x"

// TestMain sets the fuzz minimization bound unless the command line did.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.fuzzminimizetime" })
	if !given {
		if err := flag.Set("test.fuzzminimizetime", fuzzMinimizeLimit); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
