package ctl

import (
	"bytes"
	"testing"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/api"
)

// --fail-on makes status a probe: exit 3 at the level or worse, or when
// the health could not be assessed; 2 for a level it does not know.
func TestStatusFailOn(t *testing.T) {
	f := newFakeServer(t)
	at(t, f, "status", "--fail-on", "degraded").ok(t) // the fake's one replica is healthy
	at(t, f, "status", "--fail-on", "ok").failed(t, 2, api.CodeBadRequest)

	for _, c := range []struct {
		health    *api.ClusterHealth
		threshold api.HealthLevel
		exit      int
	}{
		{&api.ClusterHealth{Level: api.HealthOK}, api.HealthDegraded, 0},
		{&api.ClusterHealth{Level: api.HealthDegraded}, api.HealthDegraded, exitHealth},
		{&api.ClusterHealth{Level: api.HealthDegraded}, api.HealthCritical, 0},
		{&api.ClusterHealth{Level: api.HealthCritical}, api.HealthDegraded, exitHealth},
		{&api.ClusterHealth{Level: api.HealthUnknown}, api.HealthDegraded, exitHealth},
		{nil, api.HealthCritical, exitHealth},
		{&api.ClusterHealth{Level: api.HealthCritical}, "", 0},
	} {
		var stderr bytes.Buffer
		cmd := &cobra.Command{}
		cmd.SetErr(&stderr)
		if got := ExitCode(failHealth(cmd, c.health, c.threshold)); got != c.exit {
			t.Errorf("health %+v, --fail-on %q: exit %d, want %d", c.health, c.threshold, got, c.exit)
		}
		if (c.exit != 0) != (stderr.Len() > 0) {
			t.Errorf("health %+v, --fail-on %q: stderr %q", c.health, c.threshold, stderr.String())
		}
	}
}
