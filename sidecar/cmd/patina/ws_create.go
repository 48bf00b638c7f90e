package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/spf13/cobra"
)

type wsCreateOptions struct {
	name, repo, base, image, network string
	template, dockerfile             string
	idleStop                         string
	placement, allow                 []string
	env, secretEnv, secrets          []string
	memoryMB, pids, diskMB           int64
	cpus                             float64
	json                             bool
}

func newWsCreateCmd(a *app) *cobra.Command {
	var o wsCreateOptions
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a workspace and start its container",
		Long: `Create a workspace and start its container.

With --repo, the workspace is a new branch patina/<name> of that repository
(starting at --base, default its HEAD) checked out in a worktree on the
sidecar's machine and mounted at /workspace. Without --repo it is a scratch
workspace: an empty /workspace and no git.

The container runs --image (default: the sidecar's, patina/base:bookworm; build
it once with "patina image build"). A repository with a devcontainer.json, or
--dockerfile, gives its template instead (built once per content; see "patina
template"); --template starts from a template by name. Limits default to the sidecar's: 4096 MB,
2 CPUs, 4096 processes, and a disk of 10240 MB holding everything the
workspace writes (where the sidecar can keep disks: a local engine, a root
sidecar; elsewhere --disk is refused and the workspace has no disk limit).`,
		Example: `  patina ws create --name fix-tests --repo .
  patina ws create --repo ~/src/app --base v1.2 --env GOFLAGS=-mod=mod --memory 8192 --disk 20480
  patina ws create --repo . --dockerfile tools/Dockerfile   # the template that Dockerfile makes
  patina ws create --network none --json        # a scratch workspace without network
  patina ws create --repo . --secret GH_TOKEN --secret-env DB_PASSWORD="$(pass db)"
  patina ws create --repo . --allow pypi.org --allow '*.pythonhosted.org'   # only those hosts`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := o.request()
			if err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				done := a.progress("creating the workspace")
				ws, err := c.CreateWorkspace(ctx, req)
				done()
				if err != nil {
					return err
				}
				if o.json {
					return writeJSON(a.stdout, ws)
				}
				return printWorkspace(a.stdout, ws, a.now())
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.name, "name", "", "the workspace's name, also its branch patina/<name> (default: generated)")
	f.StringVar(&o.repo, "repo", "", "a path inside a git repository on the sidecar's machine (default: none, a scratch workspace)")
	f.StringVar(&o.base, "base", "", "the ref the branch starts from (default: the repository's HEAD)")
	f.StringVar(&o.image, "image", "", "the container image (default: the sidecar's, patina/base:bookworm)")
	f.StringVar(&o.template, "template", "", "start from template `NAME` (patina template ls) in place of an image")
	f.StringVar(&o.dockerfile, "dockerfile", "", "start from the template a Dockerfile in --repo makes (its `PATH` there; built once per content)")
	f.StringArrayVar(&o.env, "env", nil, "set `KEY=VALUE` in the container (repeatable)")
	f.StringArrayVar(&o.secretEnv, "secret-env", nil, "set `KEY=VALUE` in every session, never in the container's configuration, the value never shown (repeatable)")
	f.StringArrayVar(&o.secrets, "secret", nil, "let the workspace use secret `NAME` (patina secret set): its HTTPS requests to the secret's hosts get its header; NAME holds a placeholder inside (repeatable)")
	f.Int64Var(&o.memoryMB, "memory", 0, "memory limit in MB (default: the sidecar's, 4096)")
	f.Float64Var(&o.cpus, "cpus", 0, "CPU limit, e.g. 1.5 (default: the sidecar's, 2)")
	f.Int64Var(&o.pids, "pids", 0, "process limit (default: the sidecar's, 4096)")
	f.Int64Var(&o.diskMB, "disk", 0, "disk limit in MB for everything the workspace writes (its files, its sessions' state, what it installs): past it, writes fail with \"No space left on device\" inside (default: the sidecar's --disk)")
	f.StringVar(&o.network, "network", "", `"open" (default: the internet, never the host, the LAN or other workspaces) or "none"`)
	f.StringArrayVar(&o.allow, "allow", nil, "allow only this `DEST` (a name, *.domain, an address or CIDR, each with an optional :port; repeatable): network mode allow")
	f.StringVar(&o.idleStop, "idle-stop", "", `stop the workspace after this long without activity ("15m"; "0": never; default: the sidecar's --idle-stop): paused first, its processes kept; stopped after as long again; its next use resumes it`)
	f.StringArrayVar(&o.placement, "placement", nil, "a Swarm placement `CONSTRAINT`, e.g. node.labels.gpu==1 (repeatable; only with patina serve --engine swarm)")
	f.BoolVar(&o.json, "json", false, "print the workspace as JSON")
	return cmd
}

// request validates the flags and builds the API request.
func (o wsCreateOptions) request() (client.CreateWorkspaceRequest, error) {
	req := client.CreateWorkspaceRequest{
		Name:       o.name,
		Base:       o.base,
		Image:      o.image,
		Template:   o.template,
		Dockerfile: o.dockerfile,
		MemoryMB:   o.memoryMB,
		CPUs:       o.cpus,
		PidsLimit:  o.pids,
		DiskMB:     o.diskMB,
		IdleStop:   o.idleStop,
		Placement:  o.placement,
	}
	if o.repo != "" {
		abs, err := filepath.Abs(o.repo)
		if err != nil {
			return req, fmt.Errorf("--repo %s: %w", o.repo, err)
		}
		req.Repo = abs
	}
	if o.base != "" && o.repo == "" {
		return req, usagef("--base needs --repo (a scratch workspace has no git)")
	}
	switch {
	case len(o.allow) > 0 && o.network != "":
		return req, usagef("--allow sets network mode allow: leave out --network")
	case len(o.allow) > 0:
		req.Network = &client.NetworkPolicy{Mode: client.NetworkAllow, Allow: o.allow}
	case o.network == "bridge" || o.network == client.NetworkOpen || o.network == client.NetworkNone:
		req.Network = &client.NetworkPolicy{Mode: o.network}
		if o.network == "bridge" {
			req.Network.Mode = client.NetworkOpen
		}
	case o.network != "":
		return req, usagef("--network must be open or none (or --allow DEST ...), not %q", o.network)
	}
	if o.memoryMB < 0 || o.cpus < 0 || o.pids < 0 || o.diskMB < 0 {
		return req, usagef("--memory, --cpus, --pids and --disk must not be negative")
	}
	env, err := parseEnv(o.env)
	if err != nil {
		return req, err
	}
	req.Env = env
	if req.SecretEnv, err = parseEnvFlag("--secret-env", o.secretEnv, true); err != nil {
		return req, err
	}
	req.Secrets = o.secrets
	return req, nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseEnv parses KEY=VALUE pairs (the value may be empty or contain "=");
// a later pair wins over an earlier one with the same key.
func parseEnv(pairs []string) (map[string]string, error) { return parseEnvFlag("--env", pairs, false) }

// parseEnvFlag is parseEnv for a flag; a secret pair's value is never
// shown in an error.
func parseEnvFlag(flag string, pairs []string, secret bool) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		shown := p
		if secret {
			shown = k + "=…"
		}
		if !ok {
			if secret {
				return nil, usagef("%s: want KEY=VALUE", flag)
			}
			return nil, usagef("%s %q: want KEY=VALUE", flag, shown)
		}
		if !envName.MatchString(k) {
			return nil, usagef("%s %q: %q is not a variable name (letters, digits and _, not starting with a digit)", flag, shown, k)
		}
		env[k] = v
	}
	return env, nil
}
