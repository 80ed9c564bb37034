//go:build lockd_mutants

package mutant

import (
	"fmt"
	"os"
)

// Built says this binary was built with -tags lockd_mutants: LOCKD_MUTANT
// selects its mutants.
const Built = true

// selected is read once, at start: an unknown name stops the process
// rather than let it run unbroken while a test expects it broken.
var selected = mustSelect(os.Getenv(Env))

func mustSelect(v string) map[Mutant]bool {
	on, err := parse(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mutant: %v\n", err)
		os.Exit(2)
	}
	if len(on) > 0 {
		fmt.Fprintf(os.Stderr, "mutant: %s=%s: a deliberately broken build\n", Env, v)
	}
	return on
}

// On says whether mutant m is selected (LOCKD_MUTANT) in this process.
func On(m Mutant) bool { return selected[m] }

// Any says whether any mutant is selected in this process.
func Any() bool { return len(selected) > 0 }
