//go:build lockd_broken_stagegen

package fsm

// brokenStageGen makes a new cell take stage pages of any driver's
// generation: a late page of a driver taken over lands on the newer
// driver's copy (issue 23, finding 1). A deliberately broken build
// (-tags lockd_broken_stagegen) that TestMigrationLatePageRefused must
// catch. Never set in a normal build.
const brokenStageGen = true
