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

// cpuTimes returns each process's user+system CPU seconds from
// /proc/PID/stat, or -1 where it cannot be read.
func cpuTimes(pids []int) []float64 {
	out := make([]float64, len(pids))
	for i, pid := range pids {
		out[i] = -1
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		j := strings.LastIndexByte(s, ')') // the command name may hold spaces
		if j < 0 {
			continue
		}
		f := strings.Fields(s[j+1:]) // f[0] is field 3; utime is 14, stime 15
		if len(f) < 13 {
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
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		j := strings.LastIndexByte(s, ')')
		if j < 0 {
			continue
		}
		f := strings.Fields(s[j+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
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
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
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
