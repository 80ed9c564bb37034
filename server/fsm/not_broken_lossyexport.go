//go:build !lockd_broken_lossyexport

package fsm

// The deliberately broken build (broken_lossyexport.go) is off in every
// normal build.
const brokenLossyExport = false
