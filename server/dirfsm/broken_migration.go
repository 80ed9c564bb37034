//go:build lockd_broken_migrationdriver

package dirfsm

// brokenMigrationDriver lets any client drive a migration in flight: a
// second begin resumes it as before issue 23 (finding 1), and no step
// checks its driver. A deliberately broken build (-tags
// lockd_broken_migrationdriver) that TestMigrationRaceLosesNothing must
// catch. Never set in a normal build.
const brokenMigrationDriver = true
