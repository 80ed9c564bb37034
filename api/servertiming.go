package api

// A request's stage timings: asked for with HeaderTrace, answered in the
// W3C Server-Timing header (https://www.w3.org/TR/server-timing/).

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

const (
	// HeaderTrace asks a lockd (or a lockproxy) to answer with the
	// request's stage timings in HeaderServerTiming. Any non-empty value
	// but "0" asks; a request without it pays nothing.
	HeaderTrace = "Lockd-Trace"
	// HeaderServerTiming carries the stage timings of a traced request:
	// "decode;dur=0.104, commit;dur=3.2, …", durations in milliseconds.
	HeaderServerTiming = "Server-Timing"
	// MaxTimingStages bounds the stages one Server-Timing header carries
	// and ParseServerTiming accepts (a lockd's stages, a proxy's, and room).
	MaxTimingStages = 32
	// maxTimingName bounds a stage name's length.
	maxTimingName = 64
)

// The stages a lockd and a lockproxy name in HeaderServerTiming.
const (
	StageDecode = "decode" // request received → decoded, authorized, checked, cell found
	StageQueue  = "queue"  // → the write's preconditions (cache fence) met
	StageEntry  = "entry"  // → the log entry encoded
	StageCommit = "commit" // SyncPropose → this entry's apply begins: Raft step, log write and fsync, replication, commit
	StageApply  = "apply"  // the state machine's apply of this entry, on the leader
	StageHooks  = "hooks"  // the leader's afterApply (watches, sessions, lock-delays)
	StageWake   = "wake"   // → SyncPropose returns (the rest of the apply batch, the waiter woken)
	StageReply  = "reply"  // → the reply encoded
	StageTotal  = "total"  // the whole request inside the server
	StageProxy  = "proxy"  // a lockproxy's own time (its total less its upstream call)
	StageUpNet  = "upnet"  // the proxy's upstream call less the lockd's total: network and HTTP
)

// TraceRequested reports whether a HeaderTrace value asks for timings.
func TraceRequested(v []byte) bool { return len(v) > 0 && string(v) != "0" }

// TimingStage is one Server-Timing metric: a stage and how long it took.
type TimingStage struct {
	Name string
	Dur  time.Duration
}

// AppendServerTiming appends stages to b as a Server-Timing value, each
// "name;dur=MS" with MS in milliseconds to the microsecond.
func AppendServerTiming(b []byte, stages []TimingStage) []byte {
	for i, st := range stages {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, st.Name...)
		b = append(b, ";dur="...)
		b = strconv.AppendFloat(b, float64(st.Dur)/float64(time.Millisecond), 'f', 3, 64)
	}
	return b
}

// ParseServerTiming reads a Server-Timing value: comma-separated metrics,
// each a name and parameters after ";" (dur in milliseconds; others, such
// as desc, skipped). A metric without dur has a zero duration. A malformed
// value, or one of more than MaxTimingStages metrics, is a bad_request
// error.
func ParseServerTiming(v string) ([]TimingStage, error) {
	var out []TimingStage
	for _, metric := range splitOutsideQuotes(v, ',') {
		metric = strings.TrimSpace(metric)
		if metric == "" {
			continue
		}
		if len(out) == MaxTimingStages {
			return nil, Errorf(CodeBadRequest, "Server-Timing: more than %d metrics", MaxTimingStages)
		}
		st, err := parseTimingMetric(metric)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func parseTimingMetric(metric string) (TimingStage, error) {
	params := splitOutsideQuotes(metric, ';')
	st := TimingStage{Name: strings.TrimSpace(params[0])}
	if st.Name == "" || len(st.Name) > maxTimingName || strings.ContainsAny(st.Name, " \t\"=") {
		return TimingStage{}, Errorf(CodeBadRequest, "Server-Timing: bad metric name %q", st.Name)
	}
	for _, p := range params[1:] {
		k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.TrimSpace(k) != "dur" {
			continue
		}
		ms, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || !(ms >= 0 && ms <= float64(time.Hour/time.Millisecond)) { // NaN fails both
			return TimingStage{}, Errorf(CodeBadRequest, "Server-Timing: bad dur %q of %s", val, st.Name)
		}
		st.Dur = time.Duration(ms * float64(time.Millisecond))
	}
	return st, nil
}

// splitOutsideQuotes splits s at sep where sep is not inside a quoted
// string (a desc="a, b" parameter).
func splitOutsideQuotes(s string, sep byte) []string {
	var parts []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++ // an escaped character inside quotes
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// StageDur returns the duration of the stage named name in stages, and
// whether it is there.
func StageDur(stages []TimingStage, name string) (time.Duration, bool) {
	for _, st := range stages {
		if st.Name == name {
			return st.Dur, true
		}
	}
	return 0, false
}

// FormatStages is stages as a Server-Timing value (a string).
func FormatStages(stages []TimingStage) string { return string(AppendServerTiming(nil, stages)) }

// String is "name=1.234ms".
func (s TimingStage) String() string {
	return fmt.Sprintf("%s=%.3fms", s.Name, float64(s.Dur)/float64(time.Millisecond))
}
