//go:build lockd_broken_exportowner

package fsm

// exportedOwner drops a node's owner from a prefix's export: a
// deliberately broken build (-tags lockd_broken_exportowner) that
// TestMoveKeepsOwners and TestHostileCredentials must catch (issue 22,
// hole 9). Never in a normal build.
func exportedOwner(string) string { return "" }
