package ctl

// lockctl -v: the lease telemetry of the sessions a long command (lock,
// elect, watch) holds, on stderr, every leaseReportEvery and at the end.

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lockservice/lockd/sdk"
)

// leaseReportEvery is how often lockctl -v prints its sessions' figures.
const leaseReportEvery = 10 * time.Second

// reportLease starts printing c's sessions' lease figures to w, with -v;
// the returned stop ends it and prints them a last time.
func (g *globals) reportLease(c *sdk.Client, w io.Writer) (stop func()) {
	if !g.verbose {
		return func() {}
	}
	var mu sync.Mutex // one report at a time on w
	report := func(final bool) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		for _, st := range c.SessionStats() {
			fmt.Fprintln(w, formatLease(st, now, final))
		}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(leaseReportEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				report(false)
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		report(true)
	}
}

// formatLease is one session's figures as lockctl -v prints them.
func formatLease(st sdk.SessionStats, now time.Time, final bool) string {
	confirmed := "never"
	if !st.LastConfirmed.IsZero() {
		confirmed = now.Sub(st.LastConfirmed).Round(time.Millisecond).String() + " ago"
	}
	label := "lease"
	if final {
		label = "lease (final)"
	}
	return fmt.Sprintf("%s: cell=%s session=%d epoch=%d margin=%v last_confirmed=%s jeopardy=%v episodes=%d jeopardy_time=%v failovers=%d keepalives=%d failed=%d",
		label, st.Cell, st.Session, st.Epoch, st.LeaseMargin.Round(time.Millisecond), confirmed, st.InJeopardy,
		st.JeopardyEpisodes, st.JeopardyTime.Round(time.Millisecond), st.Failovers, st.KeepAlivesSent, st.KeepAlivesFailed)
}
