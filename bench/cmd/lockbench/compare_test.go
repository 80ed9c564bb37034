package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lockservice/lockd/bench/report"
	"github.com/lockservice/lockd/bench/stats"
)

func TestCompareSides(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args, a, b []string
		wantA      []string
		ok         bool
	}{
		{"two files", []string{"x.json", "y.json"}, nil, nil, []string{"x.json"}, true},
		{"alternations", nil, []string{"a1", "a2", "a3"}, []string{"b1", "b2", "b3"}, []string{"a1", "a2", "a3"}, true},
		{"one file", []string{"x.json"}, nil, nil, nil, false},
		{"both forms", []string{"x", "y"}, []string{"a"}, []string{"b"}, nil, false},
		{"one side", nil, []string{"a"}, nil, nil, false},
		{"too many", nil, strings.Fields("1 2 3 4 5 6 7 8 9 10"), []string{"b"}, nil, false},
	} {
		a, _, err := compareSides(tc.args, tc.a, tc.b)
		if tc.ok != (err == nil) || tc.ok && !slices.Equal(a, tc.wantA) {
			t.Errorf("%s: %v %v", tc.name, a, err)
		}
		if err != nil && !errors.Is(err, errCompareArgs) {
			t.Errorf("%s: error %v without its code", tc.name, err)
		}
	}
}

// A run's own figures feed its capacity plan.
func TestMeasuredPerCell(t *testing.T) {
	rate := func(r float64) stats.Summary { return stats.Summary{N: 1, Rate: r} }
	r := &report.Run{Results: []report.Result{
		{Scenario: "writes", Params: map[string]string{"prefix": "/demo"}, Summary: rate(5000)},
		{Scenario: "writes", Params: map[string]string{"prefix": "/payments"}, Summary: rate(6000)},
		{Scenario: "writes", Params: map[string]string{"cells": "2"}, Summary: rate(11000)}, // the sum: not one cell's
		{Scenario: "acquire", Params: map[string]string{"locks": "distinct"}, Summary: rate(2000)},
		{Scenario: "acquire", Params: map[string]string{"locks": "one lock"}, Summary: rate(9000)},
		{Scenario: "sessions", Params: map[string]string{"sessions": "2000"}, Extra: map[string]float64{"keepalives_per_s": 500, "cpu_pct_replica1": 2, "cpu_pct_replica3": 10}},
		{Scenario: "proxy", Params: map[string]string{"sessions": "10000", "proxies": "2"}, Extra: map[string]float64{"proxy1_cpu_pct": 10, "proxy2_cpu_pct": 10, "leader_keepalive_rpcs_per_s": 2}},
		{Scenario: "proxy", Params: map[string]string{"sessions": "50000", "proxies": "2"}, Extra: map[string]float64{"proxy1_cpu_pct": 30, "proxy2_cpu_pct": 34, "leader_keepalive_rpcs_per_s": 3}},
		{Scenario: "proxy", Params: map[string]string{"route": "via proxy"}, Summary: rate(100)},
		// Too small to extrapolate CPU from.
		{Scenario: "proxy", Params: map[string]string{"sessions": "100", "proxies": "2"}, Extra: map[string]float64{"proxy1_cpu_pct": 5, "proxy2_cpu_pct": 5}},
	}}
	per, inputs := measuredPerCell(r, 0.5)
	want := per
	want.WritesPerSec, want.AcquiresPerSec, want.KeepAliveEvery, want.LeaderCPUPctPerKeepAlive = 6000, 2000, 4, 0.02
	want.SessionsPerProxy, want.ProxyKeepAlivesPerSec = 50_000/2*50/32.0, 1.5
	if per != want {
		t.Errorf("measured %+v\nwant %+v", per, want)
	}
	if len(inputs) != 5 {
		t.Errorf("inputs %q", inputs)
	}
	plan := runCapacityPlan(r)
	if plan == nil || plan.Result != "1 cells, 5 replicas, 3 proxies" || len(plan.Reasoning) < 6 {
		t.Errorf("plan %+v", plan)
	}
	empty, in := measuredPerCell(&report.Run{}, 0.5)
	if empty.WritesPerSec != specCellWrites || len(in) != 1 || runCapacityPlan(&report.Run{}) == nil {
		t.Errorf("no figures: %+v %q", empty, in)
	}
}
