// Package archtest holds the test that keeps ARCHITECTURE.md true: its
// import table (which module package may import which) is checked against
// the imports `go list` reports, so an arrow the map does not allow, or a
// package the map does not name, fails `go test ./internal/archtest/`.
package archtest
