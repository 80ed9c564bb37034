//go:build race

package integration_test

const benchWaiters = 100
