//go:build !race

package integration_test

// scenarioContenders is the line in TestScenario3: the spec's 2 000, each
// with its own client and session.
const scenarioContenders = 2000
