package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/server/lockd"
)

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the lockd build",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "lockd", lockd.Version)
		},
	}
}
