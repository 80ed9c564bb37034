//go:build race

package httpapi

// raceEnabled: the race detector inflates memory figures; tests that
// bound them only log.
const raceEnabled = true
