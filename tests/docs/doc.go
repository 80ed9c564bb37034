// Package docs runs the documentation: every shell command and Go program
// in README.md and docs/*.md, extracted from the files themselves, against
// dev clusters of real processes (`bin/lockd dev`, the binaries built
// fresh), with the outputs the files show checked where they show them
// (issue 28, item 1). tests/docs/README.md is the guide for writers.
//
// Conventions (in the Markdown):
//
//   - A fence tagged sh, bash or console is shell; go is Go; any other tag
//     (json, text, none) is not run. A console block's commands are its
//     lines starting "$ ", the lines after one its expected output.
//   - A shell block runs in one bash, command by command, as typed into a
//     terminal (variables, $!, kill, wait carry), in a working directory
//     whose bin/ holds lockd, lockctl, lockproxy and lockbench (also on
//     PATH). A command is a line, with the lines after it while it is
//     incomplete ("\", an open quote, if or pipe). Each must exit 0; the
//     block stops at the first that does not.
//   - Lines "# > TEXT" after a command are its expected output: each must
//     equal a line of its stdout, in order, spaces trimmed and runs of
//     spaces counted as one; "..." in TEXT matches any text. "# > [exit N]"
//     expects exit status N instead of 0.
//   - A command ending in "&" runs in the background: the block goes on
//     once it printed its expected lines (or its first line, or after a
//     second); a job still running when the block ends is stopped by PID.
//   - A go block is a complete package main, as gofmt formats it, built
//     inside this module and run; it must exit 0.
//   - The dev cluster's default addresses (127.0.0.1:7001-7006, 7101-7106,
//     7201-7202, 2379, 2479) in commands, programs and expected lines are
//     the test cluster's: the test runs on ports of its own. lockctl
//     without --endpoints reaches it through LOCKCTL_ENDPOINTS; etcdctl
//     must be given --endpoints (it refuses ETCDCTL_ENDPOINTS beside it).
//   - Marker comments on the lines directly before a fence, each
//     <!-- doctest: KEY ARGS -->:
//     skip REASON: not run; listed with the reason.
//     auth: run on the cluster started with --auth (make run AUTH=1),
//     in a working directory of its own whose .lockd-dev is that cluster's.
//     background PATTERN[, PATTERN]: a command containing a PATTERN keeps
//     running (lockctl elect in a terminal of its own): it is run as if it
//     ended in "&", and it must not exit non-zero while the block runs.
//     files NAME...: the user's files the commands run (testdata/files),
//     put in the working directory first.
//
// A block using a tool not everyone has (etcdctl) is skipped, named, when
// the tool is missing, unless LOCKD_REQUIRE_DOCTOOLS=1 (.ci/run sets it).
//
// TestSnippetList lists every block without a cluster and fails on a
// shell or Go block that can neither run nor says why; TestDocs runs them;
// TestRunnerReportsBrokenSnippets shows the check failing on broken ones.
package docs
