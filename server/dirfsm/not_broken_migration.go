//go:build !lockd_broken_migrationdriver

package dirfsm

// The deliberately broken build (broken_migration.go) is off in every
// normal build.
const brokenMigrationDriver = false
