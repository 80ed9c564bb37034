package api

import (
	"fmt"
	"strings"
	"time"
)

// CellTiming is one cell's timing, for a cell whose replicas are far
// apart (a small global cell across regions, 50–150 ms round trips): a
// slower heartbeat, election timeouts of seconds, a longer lease, and the
// client's KeepAlive interval and grace to match. A zero field takes the
// lockds' default (their --rtt-ms heartbeat, elections in 10–20 ticks,
// --lease, lease/3, DefaultGrace). The cell's replicas start their Raft
// group with it and its clients learn it when they open a session.
type CellTiming struct {
	HeartbeatMS int64 `json:"heartbeat_ms,omitempty"` // the leader's heartbeat interval
	ElectionMS  int64 `json:"election_ms,omitempty"`  // the shortest election timeout (elections take 1–2×)
	LeaseMS     int64 `json:"lease_ms,omitempty"`     // the default session lease
	KeepAliveMS int64 `json:"keepalive_ms,omitempty"` // how often a client renews (a long-poll of this length)
	GraceMS     int64 `json:"grace_ms,omitempty"`     // how long a client in jeopardy keeps trying
}

// IsZero reports whether every field takes the default.
func (t CellTiming) IsZero() bool { return t == CellTiming{} }

// Check refuses a timing that cannot work: elections must outlast a few
// heartbeats (5), a lease must outlast elections (3 of the longest, so a
// fail-over never expires a healthy session), a client must renew a few
// times per lease (3), and a client in jeopardy must keep trying for at
// least a lease.
func (t CellTiming) Check() error {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	for _, f := range []struct {
		name string
		v    int64
	}{{"heartbeat", t.HeartbeatMS}, {"election", t.ElectionMS}, {"lease", t.LeaseMS}, {"keepalive", t.KeepAliveMS}, {"grace", t.GraceMS}} {
		if f.v < 0 {
			return Errorf(CodeBadRequest, "cell timing: %s %v is negative", f.name, ms(f.v))
		}
	}
	if t.HeartbeatMS > 0 && t.ElectionMS == 0 {
		return Errorf(CodeBadRequest, "cell timing: a heartbeat of %v needs an election timeout to go with it (5 heartbeats or more)", ms(t.HeartbeatMS))
	}
	if t.HeartbeatMS > 0 && t.ElectionMS < 5*t.HeartbeatMS {
		return Errorf(CodeBadRequest, "cell timing: election %v is under 5 heartbeats (%v)", ms(t.ElectionMS), ms(t.HeartbeatMS))
	}
	if t.LeaseMS > 0 && (ms(t.LeaseMS) < MinLease || ms(t.LeaseMS) > MaxLease) {
		return Errorf(CodeBadRequest, "cell timing: lease %v is outside %v to %v", ms(t.LeaseMS), MinLease, MaxLease)
	}
	if t.LeaseMS > 0 && t.ElectionMS > 0 && t.LeaseMS < 3*2*t.ElectionMS {
		return Errorf(CodeBadRequest, "cell timing: lease %v is under 3 of the longest elections (2 × %v): a fail-over could expire healthy sessions", ms(t.LeaseMS), ms(t.ElectionMS))
	}
	if t.LeaseMS > 0 && t.KeepAliveMS > 0 && t.KeepAliveMS > t.LeaseMS/3 {
		return Errorf(CodeBadRequest, "cell timing: keepalive %v is over a third of the lease %v", ms(t.KeepAliveMS), ms(t.LeaseMS))
	}
	if t.KeepAliveMS > 0 && ms(t.KeepAliveMS) > MaxKeepAliveWait {
		return Errorf(CodeBadRequest, "cell timing: keepalive %v is over %v", ms(t.KeepAliveMS), MaxKeepAliveWait)
	}
	if t.LeaseMS > 0 && t.GraceMS > 0 && t.GraceMS < t.LeaseMS {
		return Errorf(CodeBadRequest, "cell timing: grace %v is under the lease %v", ms(t.GraceMS), ms(t.LeaseMS))
	}
	return nil
}

// ParseCellTiming reads "heartbeat=500ms,election=5s,lease=30s,keepalive=10s,grace=2m"
// (any subset) and checks it.
func ParseCellTiming(s string) (CellTiming, error) {
	var t CellTiming
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		d, err := time.ParseDuration(v)
		if !ok || err != nil {
			return t, Errorf(CodeBadRequest, "cell timing %q: want name=duration like election=5s", kv)
		}
		if d%time.Millisecond != 0 {
			return t, Errorf(CodeBadRequest, "cell timing %q: whole milliseconds", kv)
		}
		m := d.Milliseconds()
		switch k {
		case "heartbeat":
			t.HeartbeatMS = m
		case "election":
			t.ElectionMS = m
		case "lease":
			t.LeaseMS = m
		case "keepalive":
			t.KeepAliveMS = m
		case "grace":
			t.GraceMS = m
		default:
			return t, Errorf(CodeBadRequest, "cell timing %q: %s is not one of heartbeat, election, lease, keepalive, grace", kv, k)
		}
	}
	return t, t.Check()
}

// String is the timing in ParseCellTiming's form ("" when all default).
func (t CellTiming) String() string {
	var parts []string
	add := func(name string, v int64) {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%v", name, time.Duration(v)*time.Millisecond))
		}
	}
	add("heartbeat", t.HeartbeatMS)
	add("election", t.ElectionMS)
	add("lease", t.LeaseMS)
	add("keepalive", t.KeepAliveMS)
	add("grace", t.GraceMS)
	return strings.Join(parts, ",")
}

// Ticks converts a duration in ms to Raft ticks of rttMS, rounding up,
// never fewer than def (the lockd's own setting, which it also is when
// no duration is given): a cell's timing only slows a lockd's down.
func Ticks(ms int64, rttMS uint64, def uint64) uint64 {
	if ms <= 0 || rttMS == 0 {
		return def
	}
	return max(def, (uint64(ms)+rttMS-1)/rttMS)
}
