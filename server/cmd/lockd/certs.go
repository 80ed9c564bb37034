package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/internal/tlsutil"
)

// certsCommand makes a development CA and certificates (lockd certs).
func certsCommand() *cobra.Command {
	var dir, hosts string
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make a development CA and certificates for lockds, lockproxies and clients (mutual TLS)",
		Long: "Writes ca.pem and ca-key.pem (the CA), node.pem and node-key.pem (for every lockd and lockproxy: server\n" +
			"and client use, valid for --hosts) and client.pem and client-key.pem (lockctl, applications) into --dir.\n" +
			"Existing files are kept. For production, use your own CA.",
		Example: "  lockd certs --dir ./tls --hosts 127.0.0.1,localhost\n" +
			"  lockd serve ... --tls-cert tls/node.pem --tls-key tls/node-key.pem --tls-ca tls/ca.pem\n" +
			"  lockctl --tls-cert tls/client.pem --tls-key tls/client-key.pem --tls-ca tls/ca.pem get /demo/x",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var hs []string
			for _, h := range strings.Split(hosts, ",") {
				if h = strings.TrimSpace(h); h != "" {
					hs = append(hs, h)
				}
			}
			if len(hs) == 0 {
				return fmt.Errorf("--hosts names no host")
			}
			node, client, err := tlsutil.DevCA(dir, hs)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "CA: %s\nlockd/lockproxy: --tls-cert %s --tls-key %s --tls-ca %s\nclients: --tls-cert %s --tls-key %s --tls-ca %s\n",
				node.CA, node.Cert, node.Key, node.CA, client.Cert, client.Key, client.CA)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "./tls", "where to write the files")
	cmd.Flags().StringVar(&hosts, "hosts", "127.0.0.1,localhost", "IP addresses and names the node certificate is valid for (comma-separated)")
	return cmd
}
