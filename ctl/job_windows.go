package ctl

import (
	"os"
	"syscall"
)

// jobAttr: Windows has no process group a signal reaches and no
// parent-death signal, so COMMAND outlives a killed lockctl, and stopping
// it ends COMMAND alone, not processes it started.
func jobAttr() *syscall.SysProcAttr { return nil }

// jobStop is what stopping a job does first, as its error messages say;
// jobStopHelp says it whole in `lock --help`.
const jobStop = "terminated"

func jobStopHelp() string {
	return "terminated at once\n(COMMAND alone: Windows has no process group to signal)"
}

// termJob ends COMMAND at once: Windows cannot ask a process without a
// console to stop, and a job whose lock is lost must not go on acting.
func termJob(p *os.Process) { _ = p.Kill() }
func killJob(p *os.Process) { _ = p.Kill() }
