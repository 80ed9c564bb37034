package sdk

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestStatsAt: the margin, the jeopardy time (the current episode
// included, not after the end) and the jeopardy flag, at a given instant.
func TestStatsAt(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		snap         statsSnapshot
		margin, jtot time.Duration
		jeopardy     bool
	}{
		{"lease certain", statsSnapshot{localExpiry: now.Add(2 * time.Second), jeopardyDone: time.Second}, 2 * time.Second, time.Second, false},
		{"local lease just out", statsSnapshot{localExpiry: now}, 0, 0, true},
		{"in jeopardy for 3s", statsSnapshot{localExpiry: now.Add(-4 * time.Second), jeopardySince: now.Add(-3 * time.Second), jeopardyDone: time.Second},
			0, 4 * time.Second, true},
		{"ended in jeopardy", statsSnapshot{stats: SessionStats{Ended: true}, localExpiry: now.Add(-9 * time.Second), jeopardySince: now.Add(-8 * time.Second)},
			0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statsAt(tc.snap, now)
			if st.LeaseMargin != tc.margin || st.JeopardyTime != tc.jtot || st.InJeopardy != tc.jeopardy {
				t.Fatalf("margin %v jeopardy time %v in jeopardy %v, want %v %v %v", st.LeaseMargin, st.JeopardyTime, st.InJeopardy, tc.margin, tc.jtot, tc.jeopardy)
			}
		})
	}
}

func TestNoteRound(t *testing.T) {
	for _, tc := range []struct {
		attempts int
		err      error
		failed   uint64
	}{
		{1, nil, 0},
		{3, nil, 2},
		{2, errors.New("unavailable"), 2},
		{0, errors.New("never sent"), 0},
	} {
		var tel telemetry
		cl := tel.countSends(&call{})
		for range tc.attempts {
			cl.before()
		}
		tel.noteRound(tc.attempts, tc.err)
		if tel.sent.Load() != uint64(tc.attempts) || tel.failed.Load() != tc.failed {
			t.Errorf("noteRound(%d, %v): sent %d failed %d, want %d %d", tc.attempts, tc.err, tel.sent.Load(), tel.failed.Load(), tc.attempts, tc.failed)
		}
	}
}

// TestSessionRowsAreBounded: past MaxLabelledSessions the sessions are
// summed into one "other" row.
func TestSessionRowsAreBounded(t *testing.T) {
	const extra = 3
	var stats []SessionStats
	for i := range MaxLabelledSessions + extra {
		stats = append(stats, SessionStats{Cell: fmt.Sprintf("cell-%03d", i), Session: uint64(i + 1), Failovers: 1,
			LeaseMargin: time.Duration(i+1) * time.Second, InJeopardy: i == MaxLabelledSessions+1})
	}
	rows := sessionRows(stats)
	if len(rows) != MaxLabelledSessions+1 {
		t.Fatalf("%d rows, want %d", len(rows), MaxLabelledSessions+1)
	}
	o := rows[len(rows)-1]
	if o.cell != otherLabel || o.st.Failovers != extra || o.jeopardy != 1 || o.st.LeaseMargin != time.Duration(MaxLabelledSessions+1)*time.Second {
		t.Fatalf("the other row: %+v", o)
	}
	if rows[0].cell != "cell-000" || rows[0].session != "1" {
		t.Fatalf("the first row: %+v", rows[0])
	}
}

// TestSessionStatsThroughJeopardyAndFailover: a session's figures on the
// fake cell: confirmed KeepAlives, one jeopardy episode (its KeepAlives
// refused) and the return to safety, then a fail-over; and the same
// figures through Client.Collectors.
func TestSessionStatsThroughJeopardyAndFailover(t *testing.T) {
	bubble(t, func(t *testing.T) {
		fc := newFakeCell(t, 3)
		c := newTestClient(t, fc, shortLease)
		s, err := c.Session(testCtx(t), fc.name)
		if err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.LastConfirmed.IsZero() { // the open confirms the lease
			t.Fatalf("a fresh session: %+v", st)
		}
		waitFor(t, "a KeepAlive sent", func() bool { return s.Stats().KeepAlivesSent > 0 })
		if st := s.Stats(); st.JeopardyEpisodes != 0 || st.Failovers != 0 || st.LeaseMargin == 0 || st.InJeopardy {
			t.Fatalf("a fresh session: %+v", st)
		}

		resume := stallKeepAlives(fc, nil, s.ID())
		waitFor(t, "jeopardy", func() bool { return s.Stats().InJeopardy })
		if st := s.Stats(); st.JeopardyEpisodes != 1 || st.LeaseMargin != 0 {
			t.Fatalf("in jeopardy: %+v", st)
		}
		resume()
		waitFor(t, "safe", func() bool { return !s.Stats().InJeopardy })
		st := s.Stats()
		// A round's refused attempts are counted when it ends.
		if st.JeopardyEpisodes != 1 || st.JeopardyTime == 0 || st.LeaseMargin == 0 || st.KeepAlivesFailed == 0 {
			t.Fatalf("safe again: %+v", st)
		}

		fc.failover(1)
		waitFor(t, "the fail-over seen", func() bool { return s.Stats().Failovers == 1 })

		got := gatherSession(t, c, s)
		for name, want := range map[string]float64{
			"lockd_sdk_session_jeopardy_episodes_total": 1,
			"lockd_sdk_session_failovers_total":         1,
			"lockd_sdk_session_in_jeopardy":             0,
		} {
			if v, ok := got[name]; !ok || v != want {
				t.Errorf("%s = %v (exported %v), want %v", name, v, ok, want)
			}
		}
		for _, name := range []string{"lockd_sdk_session_keepalives_sent_total", "lockd_sdk_session_keepalives_failed_total",
			"lockd_sdk_session_jeopardy_seconds_total", "lockd_sdk_session_lease_margin_seconds", "lockd_sdk_session_last_confirmed_timestamp_seconds"} {
			if got[name] <= 0 {
				t.Errorf("%s = %v, want > 0", name, got[name])
			}
		}
	})
}

// gatherSession registers c's collectors and returns the values of s's
// series by metric name.
func gatherSession(t *testing.T, c *Client, s *Session) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, s.Cell(), fmt.Sprint(s.ID())) {
				continue
			}
			switch {
			case m.Gauge != nil:
				out[mf.GetName()] = m.GetGauge().GetValue()
			case m.Counter != nil:
				out[mf.GetName()] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func hasLabels(m *dto.Metric, cell, session string) bool {
	var c, s string
	for _, lp := range m.GetLabel() {
		switch lp.GetName() {
		case "cell":
			c = lp.GetValue()
		case "session":
			s = lp.GetValue()
		}
	}
	return c == cell && s == session
}
