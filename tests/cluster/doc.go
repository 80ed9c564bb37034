// Package testcluster runs real lockd clusters for tests, the chaos suite and
// lockbench: it builds ./server/cmd/lockd once per test binary, starts N
// separate `lockd serve` processes on 127.0.0.1 with free ports, per-cluster
// data directories and a random deployment id, and lets the caller kill,
// stop, restart, pause and resume them by PID. Client is a minimal raw
// JSON-over-HTTP client for the API (the real SDK lives in sdk/).
//
// Every wait in this package is bounded in time and in attempts. Processes
// are only ever signalled by the PID this package started; on Linux they
// also die with the test binary (PR_SET_PDEATHSIG).
//
// Environment:
//
//	TESTCLUSTER_LOCKD_BIN  use this lockd binary instead of building one
//	TESTCLUSTER_RACE=1     build lockd with -race
//	TESTCLUSTER_KEEP=1     keep the cluster's data and logs after the test
package cluster
