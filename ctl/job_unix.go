//go:build unix

package ctl

import (
	"os"
	"syscall"
)

// jobStop is what stopping a job does first, as its error messages say;
// jobStopHelp says it whole in `lock --help`.
const jobStop = "sent SIGTERM"

func jobStopHelp() string {
	return "sent SIGTERM\n(SIGKILL " + killGrace.String() + " later if still running)"
}

// termJob asks COMMAND's process group (jobAttr) to stop; killJob ends it.
func termJob(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGTERM) }
func killJob(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }
