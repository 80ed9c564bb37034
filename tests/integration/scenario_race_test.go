//go:build race

package integration_test

// scenarioContenders is the line in TestScenario3 under the race detector,
// which aborts beyond 8128 live goroutines (each sdk.Client runs several):
// 200 keeps make test green; run without -race for the spec's 2 000.
const scenarioContenders = 200
