//go:build sdk_broken_nocellrefresh

package sdk

// brokenNoCellRefresh refuses a call naming a cell the client's view
// lacks at once, without reading the directory again: a deliberately
// broken build (-tags sdk_broken_nocellrefresh, for lockctl and the test
// binary) that TestMigrateToANewCellAtOnce must catch. Never set in a
// normal build.
const brokenNoCellRefresh = true
