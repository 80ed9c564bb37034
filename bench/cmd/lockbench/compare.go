package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/bench/report"
)

// errCompareArgs is the stable code of a compare given the wrong files.
var errCompareArgs = errors.New("compare_args")

func compareCommand() *cobra.Command {
	var (
		aFiles, bFiles []string
		htmlFile       string
		output         string
	)
	cmd := &cobra.Command{
		Use:   "compare [A.json B.json]",
		Short: "Set two runs (lockbench --json files) side by side: each figure of every case both ran, with B/A and which is better",
		Example: `  lockbench compare before.json after.json --html compare.html
  lockbench compare --a etcd1.json,etcd2.json,etcd3.json --b lockd1.json,lockd2.json,lockd3.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, b, err := compareSides(args, aFiles, bFiles)
			if err != nil {
				return err
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("%w: -o must be table or json", errCompareArgs)
			}
			sa, err := loadSide(a)
			if err != nil {
				return err
			}
			sb, err := loadSide(b)
			if err != nil {
				return err
			}
			c, err := report.Compare(sa, sb)
			if err != nil {
				return err
			}
			if htmlFile != "" {
				if err := writeFile(htmlFile, c.HTML); err != nil {
					return err
				}
			}
			if output == "json" {
				return c.JSON(cmd.OutOrStdout())
			}
			return c.Table(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&aFiles, "a", nil, "side A: one or more --json files (alternations); each figure is their median")
	f.StringSliceVar(&bFiles, "b", nil, "side B: one or more --json files")
	f.StringVar(&htmlFile, "html", "", "also write a self-contained HTML page: the ratio table and each case's CDFs overlaid")
	f.StringVarP(&output, "output", "o", "table", "table or json on stdout")
	return cmd
}

// compareSides is the files of each side: two arguments, or --a and --b.
func compareSides(args, a, b []string) ([]string, []string, error) {
	switch {
	case len(args) == 2 && len(a) == 0 && len(b) == 0:
		return args[:1], args[1:], nil
	case len(args) == 0 && len(a) > 0 && len(b) > 0:
		if len(a) > report.MaxRunsPerSide || len(b) > report.MaxRunsPerSide {
			return nil, nil, fmt.Errorf("%w: at most %d files a side", errCompareArgs, report.MaxRunsPerSide)
		}
		return a, b, nil
	}
	return nil, nil, fmt.Errorf("%w: give A.json B.json, or --a FILES --b FILES", errCompareArgs)
}

// savedRun is a lockbench --json file: the report's run and the target
// it measured.
type savedRun struct {
	report.Run
	Target string `json:"target"`
}

// loadSide reads one side's files; its name lists the targets and files.
func loadSide(files []string) (report.Side, error) {
	side := report.Side{}
	var names, targets []string
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return side, err
		}
		var r savedRun
		if err := json.Unmarshal(b, &r); err != nil {
			return side, fmt.Errorf("%s: not a lockbench --json file: %w", path, err)
		}
		side.Runs = append(side.Runs, &r.Run)
		names = append(names, filepath.Base(path))
		if r.Target != "" && !slices.Contains(targets, r.Target) {
			targets = append(targets, r.Target)
		}
	}
	side.Name = strings.Join(names, ", ")
	if len(targets) > 0 {
		side.Name = strings.Join(targets, "/") + ": " + side.Name
	}
	return side, nil
}
