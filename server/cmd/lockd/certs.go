package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lockservice/lockd/internal/tlsutil"
)

// certsCommand makes a development CA and certificates (lockd certs).
func certsCommand() *cobra.Command {
	var dir, hosts, raftNode string
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make development CAs and certificates for lockds, lockproxies and clients (mutual TLS; Raft on a CA of its own)",
		Long: "Writes, into --dir, two CAs and the certificates they sign:\n" +
			"  the API CA: ca.pem and ca-key.pem; node.pem and node-key.pem (every lockd's and lockproxy's API\n" +
			"  certificate: server and client use, valid for --hosts); client.pem and client-key.pem (lockctl, applications);\n" +
			"  the Raft CA: raft-ca.pem and raft-ca-key.pem; raft.pem and raft-key.pem (the lockds' Raft certificate:\n" +
			"  server and client use, valid for --hosts). Only lockds get the Raft files: the Raft port takes no\n" +
			"  certificate the API CA signs, so an application's client.pem cannot speak Raft.\n" +
			"With --raft-node NAME, signs one more Raft certificate with the Raft CA already in --dir, for one\n" +
			"lockd: raft-NAME.pem and raft-NAME-key.pem, valid for --hosts (that lockd's Raft address).\n" +
			"Existing files are kept. For production, use your own two CAs.",
		Example: "  lockd certs --dir ./tls --hosts 127.0.0.1,localhost\n" +
			"  lockd serve ... --tls-cert tls/node.pem --tls-key tls/node-key.pem --tls-ca tls/ca.pem \\\n" +
			"    --raft-tls-cert tls/raft.pem --raft-tls-key tls/raft-key.pem --raft-tls-ca tls/raft-ca.pem\n" +
			"  lockctl --tls-cert tls/client.pem --tls-key tls/client-key.pem --tls-ca tls/ca.pem get /demo/x\n" +
			"  lockd certs --dir ./tls --raft-node lockd-4 --hosts 10.0.0.4",
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
			out := cmd.OutOrStdout()
			if raftNode != "" {
				raft, err := tlsutil.DevRaftCert(dir, raftNode, hs)
				if err != nil {
					return fmt.Errorf("the Raft certificate of %s (run lockd certs --dir %s first for the Raft CA): %w", raftNode, dir, err)
				}
				fmt.Fprintf(out, "lockd %s: --raft-tls-cert %s --raft-tls-key %s --raft-tls-ca %s\n", raftNode, raft.Cert, raft.Key, raft.CA)
				return nil
			}
			node, client, err := tlsutil.DevCA(dir, hs)
			if err != nil {
				return err
			}
			raft, err := tlsutil.DevRaftCA(dir, hs)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "API CA: %s\nRaft CA: %s (only lockds get the Raft files)\n"+
				"lockd: --tls-cert %s --tls-key %s --tls-ca %s --raft-tls-cert %s --raft-tls-key %s --raft-tls-ca %s\n"+
				"lockproxy: --tls-cert %s --tls-key %s --tls-ca %s\nclients: --tls-cert %s --tls-key %s --tls-ca %s\n",
				node.CA, raft.CA, node.Cert, node.Key, node.CA, raft.Cert, raft.Key, raft.CA,
				node.Cert, node.Key, node.CA, client.Cert, client.Key, client.CA)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "./tls", "where to write the files")
	cmd.Flags().StringVar(&hosts, "hosts", "127.0.0.1,localhost", "IP addresses and names the node and Raft certificates are valid for (comma-separated)")
	cmd.Flags().StringVar(&raftNode, "raft-node", "", "sign only a Raft certificate for one lockd, raft-NAME.pem, with the Raft CA in --dir")
	return cmd
}
