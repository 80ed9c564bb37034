package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ, 100 on every Linux lockbench targets.
const clockTicks = 100

// statFields returns the fields of /proc/PID/stat after the command
// name (which may hold spaces): f[0] is field 3 (state), f[1] the parent
// PID, f[11] and f[12] utime and stime.
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	s := string(b)
	j := strings.LastIndexByte(s, ')')
	if j < 0 {
		return nil, false
	}
	return strings.Fields(s[j+1:]), true
}

// cpuTimes returns each process's user+system CPU seconds from
// /proc/PID/stat, or -1 where it cannot be read.
func cpuTimes(pids []int) []float64 {
	out := make([]float64, len(pids))
	for i, pid := range pids {
		out[i] = -1
		f, ok := statFields(pid)
		if !ok || len(f) < 13 {
			continue
		}
		u, err1 := strconv.ParseFloat(f[11], 64)
		st, err2 := strconv.ParseFloat(f[12], 64)
		if err1 == nil && err2 == nil {
			out[i] = (u + st) / clockTicks
		}
	}
	return out
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	f, ok := statFields(pid)
	return ok && len(f) > 0 && f[0] != "Z"
}

// cmdline reads a process's argument vector.
func cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("process %d has no command line", pid)
	}
	return argv, nil
}

// rssMB is the process's resident set in MiB from /proc/PID/status, 0 if
// unknown.
func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// childPIDs lists the processes whose parent is ppid, in PID order.
func childPIDs(ppid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, ok := statFields(pid)
		if ok && len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	slices.Sort(out) // os.ReadDir sorts by name, not number
	return out
}

// replicaPIDs maps each replica id 1..n of a `lockd dev` with PID devPID to
// its process, from the children's command lines (--id N); 0 where none.
func replicaPIDs(devPID, n int) []int {
	out := make([]int, n)
	for _, pid := range childPIDs(devPID) {
		args, err := cmdline(pid)
		if err != nil {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--id" {
				if id, err := strconv.Atoi(args[i+1]); err == nil && id >= 1 && id <= n {
					out[id-1] = pid
				}
			}
		}
	}
	return out
}
