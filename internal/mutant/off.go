//go:build !lockd_mutants

package mutant

// Built says this binary was built with -tags lockd_mutants; in this build
// (every production build) it was not, and LOCKD_MUTANT is ignored.
const Built = false

// On is false for every mutant in a build without -tags lockd_mutants: the
// compiler drops the broken paths it guards.
func On(Mutant) bool { return false }

// Any is false in a build without -tags lockd_mutants.
func Any() bool { return false }
