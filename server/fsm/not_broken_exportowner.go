//go:build !lockd_broken_exportowner

package fsm

// exportedOwner is the owner a node's export carries: its own.
func exportedOwner(tenant string) string { return tenant }
