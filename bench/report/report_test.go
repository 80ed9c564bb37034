package report

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/bench/stats"
)

func sampleRun() *Run {
	start := time.Unix(1_700_000_000, 0)
	rec := stats.NewRecorder(start)
	for i := 1; i <= 50; i++ {
		rec.Add(time.Duration(i)*time.Millisecond, start.Add(time.Duration(i)*40*time.Millisecond))
	}
	return &Run{Started: start, Endpoints: []string{"127.0.0.1:7001"}, Host: "test", Results: []Result{
		{Scenario: "acquire", Case: "c=1 distinct", Summary: rec.Summarise(2 * time.Second), Extra: map[string]float64{"b": 2, "a": 1}},
		{Scenario: "writes", Case: "w=64", Summary: rec.Summarise(2 * time.Second)},
	}}
}

func TestHTMLHasEveryChartWithData(t *testing.T) {
	var b bytes.Buffer
	if err := sampleRun().HTML(&b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	svgs := regexp.MustCompile(`<svg [^>]*data-points="(\d+)"`).FindAllStringSubmatch(html, -1)
	if len(svgs) != 4 {
		t.Fatalf("%d charts, want 2 per result", len(svgs))
	}
	for _, m := range svgs {
		if m[1] == "0" {
			t.Fatalf("an empty chart: %s", m[0])
		}
	}
	if strings.Contains(html, "<script") || strings.Contains(html, "http://") && !strings.Contains(html, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Fatal("the page must be self-contained")
	}
}

func TestTableAndJSON(t *testing.T) {
	r := sampleRun()
	var tb bytes.Buffer
	if err := r.Table(&tb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(tb.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "a=1 b=2") {
		t.Fatalf("table:\n%s", tb.String())
	}
	var jb bytes.Buffer
	if err := r.JSON(&jb); err != nil {
		t.Fatal(err)
	}
	var back Run
	if err := json.Unmarshal(jb.Bytes(), &back); err != nil || len(back.Results) != 2 || back.Results[0].Summary.N != 50 {
		t.Fatalf("round trip: %v %+v", err, back)
	}
}
