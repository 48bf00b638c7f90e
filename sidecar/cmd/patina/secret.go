package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/patina-dev/patina/sidecar/client"
)

// maxSecretInput bounds a value read from stdin.
const maxSecretInput = 64 << 10

func newSecretCmd(a *app) *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:     "secret",
		Aliases: []string{"secrets"},
		Short:   "Keep credentials that workspaces use but never hold",
		Long: `A secret is an HTTP header ("Authorization: Bearer …") that the sidecar's egress
proxy sets on the HTTPS requests that workspaces granted it (ws create --secret
NAME) send to its hosts. Its value stays in the sidecar's state directory (0600)
and is never shown again, nor ever enters a workspace: there, the variable NAME
holds a placeholder, which the proxy swaps for the value wherever it appears in
the headers of a request to the secret's hosts (and nowhere else).

For HTTPS the proxy terminates TLS for those hosts only, with the sidecar's own
CA, which patina installs in the workspace's trust store (SSL_CERT_FILE,
REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS, GIT_SSL_CAINFO, CURL_CA_BUNDLE name it),
and checks the real server's certificate. Plain http:// never gets a secret.
README "Secrets" says what this guarantees and what it does not.`,
		Example: `  patina secret set GH_TOKEN --host api.github.com --host github.com --header 'Authorization: Bearer ghp_…'
  pass show github | patina secret set GH_TOKEN --host api.github.com --header Authorization --stdin
  patina secret ls
  patina ws create --name fix --repo . --secret GH_TOKEN
  patina secret rm GH_TOKEN`,
	})
	cmd.AddCommand(newSecretSetCmd(a), newSecretLsCmd(a), newSecretRmCmd(a))
	return cmd
}

func newSecretSetCmd(a *app) *cobra.Command {
	var (
		hosts  []string
		header string
		stdin  bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "set NAME --host HOST --header 'Name: value'",
		Short: "Make or replace a secret",
		Long: `Make secret NAME, or replace it (workspaces holding it use the new value from their
next request).

NAME is also the variable that holds the secret's placeholder in the
workspaces granted it: letters, digits and _, not starting with a digit.

--host names a host the header is for: a DNS name (api.github.com) or every name
below a domain (*.githubusercontent.com); repeat it for several.

--header 'Name: value' is the header. To keep the value out of your shell's
history and of the process list, give --header the name only and --stdin: the
value is read from standard input (its first line when typed at a terminal, which
does not echo it; else all of it, without a final newline).`,
		Example: `  patina secret set GH_TOKEN --host api.github.com --header 'Authorization: Bearer ghp_…'
  patina secret set GH_TOKEN --host api.github.com --header Authorization --stdin < ~/.gh-header
  printf 'Bearer %s' "$(pass show github)" | patina secret set GH_TOKEN --host api.github.com --header Authorization --stdin
  patina secret set NPM --host registry.npmjs.org --header Authorization --stdin      # prompts`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(hosts) == 0 {
				return usagef("--host is required (the host the header is for)")
			}
			if header == "" {
				return usagef("--header is required ('Name: value', or the name with --stdin)")
			}
			if stdin {
				if strings.Contains(header, ":") {
					return usagef("with --stdin, --header is the header's name only (its value comes from stdin)")
				}
				v, err := readSecretValue(a, header, args[0])
				if err != nil {
					return err
				}
				header = header + ": " + v
			} else if !strings.Contains(header, ":") {
				return usagef("--header %q: want 'Name: value' (or the name with --stdin)", header)
			}
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				s, err := c.SetSecret(ctx, args[0], client.SetSecretRequest{Hosts: hosts, Header: header})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(a.stdout, s)
				}
				_, err = fmt.Fprintf(a.stdout, "secret %s: %s for %s\n", s.Name, s.Header, strings.Join(s.Hosts, ", "))
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&hosts, "host", nil, "a `HOST` the header is for: a DNS name or *.domain (repeatable)")
	f.StringVar(&header, "header", "", "the header, 'Name: value' (with --stdin: its name only)")
	f.BoolVar(&stdin, "stdin", false, "read the header's value from standard input")
	f.BoolVar(&asJSON, "json", false, "print the secret (never its value) as JSON")
	return cmd
}

// readSecretValue reads a header's value from stdin: at a terminal, one
// line typed without echo after a prompt; else everything, less one final
// newline.
func readSecretValue(a *app, header, name string) (string, error) {
	if f, ok := a.stdin.(*os.File); ok && isTerminal(f) {
		fmt.Fprintf(a.stderr, "Value of the %s header of secret %s (not shown): ", header, name)
		restore, err := noEcho(f)
		if err != nil {
			return "", err
		}
		line, err := bufio.NewReader(io.LimitReader(f, maxSecretInput)).ReadString('\n')
		restore()
		fmt.Fprintln(a.stderr)
		if err != nil && err != io.EOF {
			return "", err
		}
		return checkSecretValue(strings.TrimRight(line, "\r\n"))
	}
	b, err := io.ReadAll(io.LimitReader(a.stdin, maxSecretInput+1))
	if err != nil {
		return "", fmt.Errorf("read the value from stdin: %w", err)
	}
	if len(b) > maxSecretInput {
		return "", usagef("the value on stdin is longer than %d bytes", maxSecretInput)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	return checkSecretValue(v)
}

func checkSecretValue(v string) (string, error) {
	if strings.TrimSpace(v) == "" {
		return "", usagef("the value on stdin is empty")
	}
	if strings.ContainsAny(v, "\r\n") {
		return "", usagef("the value on stdin holds a line break: a header's value is one line")
	}
	return v, nil
}

func newSecretLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the secrets: names, hosts and header names, never values",
		Example: `  patina secret ls
  patina secret ls --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return query(a, cmd, asJSON, func(ctx context.Context, c *client.Client) ([]client.Secret, error) {
				return c.ListSecrets(ctx)
			}, func(w io.Writer, ss []client.Secret) error {
				rows := make([][]string, 0, len(ss))
				for _, s := range ss {
					rows = append(rows, []string{s.Name, s.Header, strings.Join(s.Hosts, ", "), ago(a.now(), s.UpdatedAt)})
				}
				return writeTable(w, []string{"NAME", "HEADER", "HOSTS", "SET"}, rows)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return cmd
}

func newSecretRmCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"delete"},
		Short:   "Remove secrets (workspaces holding them get nothing more for them)",
		Example: `  patina secret rm GH_TOKEN
  patina secret rm GH_TOKEN NPM_TOKEN`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				for _, name := range args {
					if err := c.DeleteSecret(ctx, name); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}
