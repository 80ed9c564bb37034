package ctl

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// fetchHealth asks every endpoint at once for the cluster's health and
// takes the first answer (a lockproxy forwards to a lockd; a lockd of an
// older build answers none; one that hangs costs nothing while another
// answers): the same assessment the status page shows. Without any, the error of the
// first endpoint (in the order given) that answered something other than
// unavailable says why.
func fetchHealth(ctx context.Context, g *globals, eps []string) (*api.ClusterHealth, *api.Error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		i   int
		h   api.ClusterHealth
		err error
	}
	answers := make(chan answer, len(eps)) // every sender finishes without a reader
	for i, ep := range eps {
		go func() {
			h, err := sdk.FetchHealth(ctx, ep, g.access())
			answers <- answer{i, h, err}
		}()
	}
	errs := make([]*api.Error, len(eps))
	for range eps {
		a := <-answers
		if a.err == nil {
			return &a.h, nil
		}
		errs[a.i] = asAPIError(a.err)
	}
	var first *api.Error
	for _, e := range errs {
		if first == nil || first.Code == api.CodeUnavailable && e.Code != api.CodeUnavailable {
			first = e
		}
	}
	return nil, first
}

// writeHealth prints what is wrong first: the cluster's level, then each
// problem, worst first, with its reason; or why no assessment came.
func writeHealth(w io.Writer, rep statusReport) error {
	h := rep.Health
	if h == nil {
		msg := "no endpoint answered"
		if rep.HealthError != nil {
			msg = string(rep.HealthError.Code) + ": " + rep.HealthError.Message
		}
		_, err := fmt.Fprintf(w, "HEALTH unknown: %s\n\n", msg)
		return err
	}
	if len(h.Problems) == 0 {
		_, err := fmt.Fprintf(w, "HEALTH %s: nothing wrong (%s)\n\n", h.Level, healthCounts(h))
		return err
	}
	fmt.Fprintf(w, "HEALTH %s: %d problem(s) (%s)\n", h.Level, len(h.Problems), healthCounts(h))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEVEL\tSUBJECT\tCODE\tREASON")
	for _, p := range h.Problems {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Level, p.Subject, p.Code, p.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// healthCounts sums up what was assessed: "3 cells, 6 lockds, 2 proxies,
// 1 move in flight".
func healthCounts(h *api.ClusterHealth) string {
	parts := []string{plural(len(h.Cells), "cell"), plural(len(h.Lockds), "lockd"), plural(len(h.Proxies), "proxy")}
	if len(h.Moves) > 0 {
		parts = append(parts, plural(len(h.Moves), "move")+" in flight")
	}
	return strings.Join(parts, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if strings.HasSuffix(what, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(what, "y"))
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// exitHealth is lockctl status's exit status when --fail-on is met.
const exitHealth = 3

// parseFailOn reads --fail-on: "" (never), degraded or critical.
func parseFailOn(v string) (api.HealthLevel, error) {
	switch l := api.HealthLevel(v); l {
	case "", api.HealthDegraded, api.HealthCritical:
		return l, nil
	}
	return "", usagef("--fail-on takes degraded or critical, not %q", v)
}

// failHealth ends status with exitHealth when the health is threshold or
// worse, or was not assessed (a probe cannot be sure: it fails), saying
// so on stderr.
func failHealth(cmd *cobra.Command, h *api.ClusterHealth, threshold api.HealthLevel) error {
	if threshold == "" {
		return nil
	}
	if h == nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "lockctl: health not assessed (--fail-on %s)\n", threshold)
		return &exitStatusError{code: exitHealth}
	}
	if h.Level.Rank() >= threshold.Rank() {
		fmt.Fprintf(cmd.ErrOrStderr(), "lockctl: health %s, %d problem(s) (--fail-on %s)\n", h.Level, len(h.Problems), threshold)
		return &exitStatusError{code: exitHealth}
	}
	return nil
}
