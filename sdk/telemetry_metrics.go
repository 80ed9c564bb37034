package sdk

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxLabelledSessions bounds the sessions Client.Collectors labels by cell
// and session: past it (in cell order), the rest are summed into one
// series labelled cell="other", session="other" (their smallest margin,
// their oldest confirmation), so /metrics stays bounded.
const MaxLabelledSessions = 32

// otherLabel labels the sessions past MaxLabelledSessions.
const otherLabel = "other"

var (
	sessionLabels     = []string{"cell", "session"}
	descLastConfirmed = prometheus.NewDesc("lockd_sdk_session_last_confirmed_timestamp_seconds",
		"When the reply to the session's last confirmed KeepAlive arrived (Unix time; 0: none since the open).", sessionLabels, nil)
	descLeaseMargin = prometheus.NewDesc("lockd_sdk_session_lease_margin_seconds",
		"How long the SDK's conservative local lease clock still holds the session's lease (0: in jeopardy).", sessionLabels, nil)
	descInJeopardy = prometheus.NewDesc("lockd_sdk_session_in_jeopardy",
		"1 while the session's lease is in doubt (jeopardy); for cell=\"other\", how many are.", sessionLabels, nil)
	descJeopardies = prometheus.NewDesc("lockd_sdk_session_jeopardy_episodes_total",
		"Times the session's local lease ran out (jeopardy episodes).", sessionLabels, nil)
	descJeopardyTime = prometheus.NewDesc("lockd_sdk_session_jeopardy_seconds_total",
		"Total time the session spent in jeopardy, the current episode included.", sessionLabels, nil)
	descFailovers = prometheus.NewDesc("lockd_sdk_session_failovers_total",
		"Leader changes of its cell the session observed.", sessionLabels, nil)
	descKASent = prometheus.NewDesc("lockd_sdk_session_keepalives_sent_total",
		"KeepAlive requests the session sent (every attempt).", sessionLabels, nil)
	descKAFailed = prometheus.NewDesc("lockd_sdk_session_keepalives_failed_total",
		"KeepAlive requests of the session that confirmed nothing.", sessionLabels, nil)
	sessionDescs = []*prometheus.Desc{descLastConfirmed, descLeaseMargin, descInJeopardy, descJeopardies,
		descJeopardyTime, descFailovers, descKASent, descKAFailed}
)

// sessionCollector exports the lease telemetry of a client's sessions.
type sessionCollector struct{ c *Client }

// Describe sends the descriptors of every metric the collector exports.
func (sc sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range sessionDescs {
		ch <- d
	}
}

// Collect sends the current sessions' figures.
func (sc sessionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range sessionRows(sc.c.SessionStats()) {
		sendRow(ch, r)
	}
}

// sessionRow is one labelled series set: a session, or the rest summed.
type sessionRow struct {
	cell, session string
	st            SessionStats
	jeopardy      float64
}

// sessionRows labels the first MaxLabelledSessions sessions of stats (in
// cell order) and sums the rest into one "other" row.
func sessionRows(stats []SessionStats) []sessionRow {
	var rows []sessionRow
	for i, st := range stats {
		if i < MaxLabelledSessions {
			rows = append(rows, sessionRow{cell: st.Cell, session: strconv.FormatUint(st.Session, 10), st: st, jeopardy: b2f(st.InJeopardy)})
			continue
		}
		if i == MaxLabelledSessions {
			rows = append(rows, sessionRow{cell: otherLabel, session: otherLabel, st: SessionStats{LastConfirmed: st.LastConfirmed, LeaseMargin: st.LeaseMargin}})
		}
		o := &rows[len(rows)-1]
		o.st = sumStats(o.st, st)
		o.jeopardy += b2f(st.InJeopardy)
	}
	return rows
}

// sumStats adds st into sum: counters summed, the smallest margin and
// the oldest confirmation kept.
func sumStats(sum, st SessionStats) SessionStats {
	sum.JeopardyEpisodes += st.JeopardyEpisodes
	sum.JeopardyTime += st.JeopardyTime
	sum.Failovers += st.Failovers
	sum.KeepAlivesSent += st.KeepAlivesSent
	sum.KeepAlivesFailed += st.KeepAlivesFailed
	sum.LeaseMargin = min(sum.LeaseMargin, st.LeaseMargin)
	if st.LastConfirmed.Before(sum.LastConfirmed) {
		sum.LastConfirmed = st.LastConfirmed
	}
	return sum
}

func sendRow(ch chan<- prometheus.Metric, r sessionRow) {
	var confirmed float64
	if !r.st.LastConfirmed.IsZero() {
		confirmed = float64(r.st.LastConfirmed.UnixNano()) / 1e9
	}
	for _, m := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v float64
	}{
		{descLastConfirmed, prometheus.GaugeValue, confirmed},
		{descLeaseMargin, prometheus.GaugeValue, r.st.LeaseMargin.Seconds()},
		{descInJeopardy, prometheus.GaugeValue, r.jeopardy},
		{descJeopardies, prometheus.CounterValue, float64(r.st.JeopardyEpisodes)},
		{descJeopardyTime, prometheus.CounterValue, r.st.JeopardyTime.Seconds()},
		{descFailovers, prometheus.CounterValue, float64(r.st.Failovers)},
		{descKASent, prometheus.CounterValue, float64(r.st.KeepAlivesSent)},
		{descKAFailed, prometheus.CounterValue, float64(r.st.KeepAlivesFailed)},
	} {
		ch <- prometheus.MustNewConstMetric(m.d, m.t, m.v, r.cell, r.session)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
