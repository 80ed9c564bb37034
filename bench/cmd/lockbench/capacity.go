package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/bench/capacity"
	"github.com/lockservice/lockd/bench/report"
)

func capacityCommand() *cobra.Command {
	var (
		t         capacity.Target
		per       capacity.PerCell
		from      string
		jsonOut   bool
		headroomP float64
	)
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Size a deployment (cells, replicas, proxies) for a target load, from measured per-cell figures",
		Example: `  lockbench capacity --sessions 50000 --locks-per-s 83 --writes-per-s 34 --zones 3
  lockbench capacity --sessions 200000 --locks-per-s 800 --from bench/out/run/lockbench.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			per.Headroom = headroomP / 100
			if from != "" {
				measured, inputs, err := measuredFrom(from, per.Headroom)
				if err != nil {
					return err
				}
				per = measured
				for _, in := range inputs {
					fmt.Fprintf(cmd.ErrOrStderr(), "from %s: %s\n", from, in)
				}
			}
			p, err := capacity.Compute(t, per)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(p)
			}
			for _, line := range p.Reasoning {
				fmt.Fprintln(out, line)
			}
			fmt.Fprintf(out, "=> %d cells, %d replicas, %d proxies\n", p.Cells, p.Replicas, p.Proxies)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&t.Sessions, "sessions", 50_000, "live sessions")
	f.Float64Var(&t.LocksPerSec, "locks-per-s", 83, "lock acquisitions per second")
	f.Float64Var(&t.WritesPerS, "writes-per-s", 34, "other writes per second (config, session opens and expiries)")
	f.IntVar(&t.Zones, "zones", 3, "availability zones")
	f.Float64Var(&per.WritesPerSec, "cell-writes-per-s", 10_000, "writes one cell sustains (the spec's figure; --from takes a measured one)")
	f.Float64Var(&headroomP, "headroom", 50, "percent of a cell's measured writes to plan for")
	f.StringVar(&from, "from", "", "a lockbench --json file: use its measured figures (per-cell writes, acquires, KeepAlives and leader CPU per session, sessions per proxy)")
	f.BoolVar(&jsonOut, "json", false, "print the plan as JSON")
	return cmd
}

// measuredFrom reads a lockbench --json file's own figures
// (measuredPerCell); it must hold a per-cell writes result.
func measuredFrom(path string, headroom float64) (capacity.PerCell, []string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return capacity.PerCell{}, nil, err
	}
	var r report.Run
	if err := json.Unmarshal(b, &r); err != nil {
		return capacity.PerCell{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	per, inputs := measuredPerCell(&r, headroom)
	if !slices.ContainsFunc(r.Results, func(res report.Result) bool { return res.Scenario == "writes" && res.Params["prefix"] != "" }) {
		return capacity.PerCell{}, nil, fmt.Errorf("%s has no per-cell writes result (run lockbench run writes)", path)
	}
	return per, inputs, nil
}
