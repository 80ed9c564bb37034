package api

import (
	"testing"
	"time"
)

// TestServerTimingFormat: stages become "name;dur=MS" to the microsecond,
// comma-separated.
func TestServerTimingFormat(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stages []TimingStage
		want   string
	}{
		{"none", nil, ""},
		{"one", []TimingStage{{"commit", 3200 * time.Microsecond}}, "commit;dur=3.200"},
		{"two", []TimingStage{{"decode", 104 * time.Microsecond}, {"total", 5 * time.Millisecond}}, "decode;dur=0.104, total;dur=5.000"},
		{"sub-microsecond rounds", []TimingStage{{"hooks", 1500}}, "hooks;dur=0.002"},
		{"zero", []TimingStage{{"wake", 0}}, "wake;dur=0.000"},
	} {
		if got := FormatStages(tc.stages); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestServerTimingParse: what the W3C header allows (spaces, desc
// parameters with commas inside quotes, a metric without dur) parses; a
// malformed value is a bad_request error.
func TestServerTimingParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
		want  []TimingStage
		code  Code
	}{
		{"empty", "", nil, ""},
		{"ours", "decode;dur=0.104, commit;dur=3.2", []TimingStage{{"decode", 104 * time.Microsecond}, {"commit", 3200 * time.Microsecond}}, ""},
		{"spaces and desc", ` db ; desc="a, b;c" ; dur = 1.5 ,cache`, []TimingStage{{"db", 1500 * time.Microsecond}, {"cache", 0}}, ""},
		{"escaped quote in desc", `x;desc="say \"hi\", ok";dur=2`, []TimingStage{{"x", 2 * time.Millisecond}}, ""},
		{"trailing comma", "a;dur=1,", []TimingStage{{"a", time.Millisecond}}, ""},
		{"no name", ";dur=1", nil, CodeBadRequest},
		{"bad dur", "a;dur=fast", nil, CodeBadRequest},
		{"negative dur", "a;dur=-1", nil, CodeBadRequest},
		{"huge dur", "a;dur=1e12", nil, CodeBadRequest},
		{"quote in name", `"a";dur=1`, nil, CodeBadRequest},
	} {
		got, err := ParseServerTiming(tc.value)
		if CodeOf(err) != tc.code {
			t.Errorf("%s: error %v, want code %q", tc.name, err, tc.code)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: stage %d %v, want %v", tc.name, i, got[i], tc.want[i])
			}
		}
	}
}

// TestServerTimingBounds: at most MaxTimingStages metrics, and what
// AppendServerTiming writes ParseServerTiming reads back.
func TestServerTimingBounds(t *testing.T) {
	stages := make([]TimingStage, MaxTimingStages+1)
	for i := range stages {
		stages[i] = TimingStage{Name: "s", Dur: time.Duration(i) * time.Microsecond}
	}
	if _, err := ParseServerTiming(FormatStages(stages)); CodeOf(err) != CodeBadRequest {
		t.Fatalf("%d metrics: %v, want bad_request", len(stages), err)
	}
	back, err := ParseServerTiming(FormatStages(stages[:MaxTimingStages]))
	if err != nil || len(back) != MaxTimingStages {
		t.Fatalf("%d metrics: %d back, %v", MaxTimingStages, len(back), err)
	}
	for i := range back {
		if back[i] != stages[i] {
			t.Fatalf("round trip: stage %d %v, want %v", i, back[i], stages[i])
		}
	}
	if !TraceRequested([]byte("1")) || TraceRequested([]byte("0")) || TraceRequested(nil) {
		t.Fatal("TraceRequested: 1 asks, 0 and none do not")
	}
}
