package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/bench/report"
)

func TestCheckTarget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		target    string
		scenarios []string
		set       []string
		want      error // nil: accepted
	}{
		{"lockd runs everything", targetLockd, []string{"acquire", "cache", "failover", "disk"}, []string{"auth", "proxies"}, nil},
		{"etcd runs the four", targetEtcd, []string{"acquire", "writes", "herd", "sessions"}, []string{"start", "concurrency", "cells", "etcd"}, nil},
		{"unknown target", "zookeeper", []string{"acquire"}, nil, errUnknownTarget},
		{"empty target", "", []string{"acquire"}, nil, errUnknownTarget},
		{"etcd refuses cache", targetEtcd, []string{"acquire", "cache"}, nil, errNotOnTarget},
		{"etcd refuses disk", targetEtcd, []string{"disk"}, nil, errNotOnTarget},
		{"etcd refuses failover", targetEtcd, []string{"failover"}, nil, errNotOnTarget},
		{"etcd refuses proxies", targetEtcd, []string{"acquire"}, []string{"via-proxies"}, errNotOnTarget},
		{"etcd refuses auth", targetEtcd, []string{"herd"}, []string{"auth"}, errNotOnTarget},
		{"etcd refuses a profile", targetEtcd, []string{"writes"}, []string{"profile-dir"}, errNotOnTarget},
		{"lockd refuses --etcd", targetLockd, []string{"acquire"}, []string{"etcd"}, errNotOnTarget},
	} {
		err := checkTarget(tc.target, tc.scenarios, tc.set)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: checkTarget = %v, want %v", tc.name, err, tc.want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), tc.want.Error()+": ") {
			t.Errorf("%s: %q does not start with its code %q", tc.name, err, tc.want)
		}
	}
}

func TestCounterSum(t *testing.T) {
	const exposition = `# HELP etcd_debugging_mvcc_events_total Total number of events sent by this member.
# TYPE etcd_debugging_mvcc_events_total counter
etcd_debugging_mvcc_events_total 42
etcd_debugging_mvcc_events_total_other 1000
etcd_debugging_lease_renewed_total{a="x"} 3
etcd_debugging_lease_renewed_total{a="y"} 4.5
`
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"etcd_debugging_mvcc_events_total", 42},
		{"etcd_debugging_lease_renewed_total", 7.5},
		{"etcd_missing_total", 0},
	} {
		got, err := counterSum(strings.NewReader(exposition), tc.name)
		if err != nil || got != tc.want {
			t.Errorf("counterSum(%s) = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestLeaseTTL(t *testing.T) {
	for _, tc := range []struct {
		lease time.Duration
		want  int
	}{
		{12 * time.Second, 12},
		{1500 * time.Millisecond, 2},
		{0, 1},
	} {
		if got := leaseTTL(tc.lease); got != tc.want {
			t.Errorf("leaseTTL(%v) = %d, want %d", tc.lease, got, tc.want)
		}
	}
}

func TestHTTPURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:2379":         "http://127.0.0.1:2379",
		"https://10.0.0.1:2379/": "https://10.0.0.1:2379",
	} {
		if got := httpURL(in); got != want {
			t.Errorf("httpURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRunRecordJSON: the record is the report's run plus its target, and
// a reader of report.Run alone still reads it.
func TestRunRecordJSON(t *testing.T) {
	r := &report.Run{Endpoints: []string{"127.0.0.1:2379"}, Results: []report.Result{{Scenario: "acquire", Case: "1 workers, distinct"}}}
	var b bytes.Buffer
	if err := (&runRecord{Run: r, Target: targetEtcd, ServerVersion: "3.4.23"}).JSON(&b); err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Target        string `json:"target"`
		ServerVersion string `json:"server_version"`
	}
	var back report.Run
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if rec.Target != targetEtcd || rec.ServerVersion != "3.4.23" {
		t.Errorf("target %q version %q in %s", rec.Target, rec.ServerVersion, b.String())
	}
	if len(back.Results) != 1 || back.Results[0].Case != "1 workers, distinct" || len(back.Endpoints) != 1 {
		t.Errorf("report.Run read back %+v from %s", back, b.String())
	}
}
