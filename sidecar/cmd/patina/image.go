//go:build !windows

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/docker/docker/client"
	"github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/sidecar/image"
	"github.com/spf13/cobra"
)

func newImageCmd(a *app) *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "image",
		Short: "Build patina's workspace image, and its agent image for swarm nodes",
	})
	cmd.AddCommand(newImageBuildCmd(a), newImageAgentCmd(a))
	return cmd
}

type imageBuildOptions struct {
	tag, suite, mirror string
	packages           []string
	force, verbose     bool
	ifMissing          bool // the default now; kept so that old scripts run
}

func newImageBuildCmd(a *app) *cobra.Command {
	var o imageBuildOptions
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the default workspace image offline, with debootstrap",
		Long: `Build patina's default workspace image, patina/base:bookworm, without any
container registry: debootstrap writes a minimal Debian root filesystem from the
Debian mirror this machine's apt already uses, and it is imported into Docker.

It needs root, debootstrap (apt-get install debootstrap) and a Docker engine
(DOCKER_HOST etc. are honoured); it does not need the sidecar.

It builds only when the tag is missing: run it again and it says the image is
present (--force builds it anew and re-points the tag). A build takes half a
minute or more; its progress goes to stderr as one line per phase (rewritten
in place on a terminal); --verbose shows debootstrap's whole output instead.
Builds of one tag are serialised across processes.`,
		Example: `  patina image build
  patina image build --force
  patina image build --tag patina/base:python --package python3 --package git --package bash
  patina image build --mirror http://deb.debian.org/debian --suite trixie --tag patina/base:trixie`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.imageBuild(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tag, "tag", image.DefaultTag, "the image's tag")
	f.StringVar(&o.suite, "suite", image.DefaultSuite, "the Debian release")
	f.StringVar(&o.mirror, "mirror", "", "the Debian mirror URL (default: the one in this machine's apt sources)")
	f.StringArrayVar(&o.packages, "package", nil, "a package to install; repeat it for each (replaces the default list: "+fmt.Sprint(image.DefaultPackages())+")")
	f.BoolVar(&o.force, "force", false, "build even if the tag exists already, and re-point it")
	f.BoolVar(&o.verbose, "verbose", false, "show debootstrap's whole output, not a progress line")
	f.BoolVar(&o.ifMissing, "if-missing", false, "do nothing if the tag exists already (the default)")
	_ = f.MarkHidden("if-missing")
	cmd.MarkFlagsMutuallyExclusive("force", "if-missing")
	return cmd
}

func (a *app) imageBuild(ctx context.Context, o imageBuildOptions) error {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var progress io.Writer = a.stderr
	if !o.verbose {
		f, ok := a.stderr.(*os.File)
		line := image.NewProgressLine(a.stderr, ok && isTerminal(f))
		defer line.Close()
		progress = line
	}
	res, err := image.New(image.Config{}, cli, logger).Build(ctx, image.BuildRequest{
		Tag:       o.tag,
		Suite:     o.suite,
		Mirror:    o.mirror,
		Packages:  o.packages,
		Progress:  progress,
		IfMissing: !o.force,
	})
	if err != nil {
		return err
	}
	if !res.Built {
		_, err = fmt.Fprintf(a.stdout, "%s is present already (%s, %s); --force builds it anew\n", res.Tag, shortImageID(res.ID), humanBytes(res.Size))
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "built %s: %s, %s, in %s from %s\n",
		res.Tag, shortImageID(res.ID), humanBytes(res.Size), res.Duration.Round(100*time.Millisecond), res.Mirror)
	return err
}

// shortImageID cuts "sha256:0123..." to the 12 hex digits docker shows.
func shortImageID(id string) string {
	const prefix = "sha256:"
	if len(id) > len(prefix) && id[:len(prefix)] == prefix {
		id = id[len(prefix):]
	}
	return shortID(id)
}

func newImageAgentCmd(a *app) *cobra.Command {
	var bin string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Make patina's agent image of a binary (on each swarm node)",
		Long: `Make patina's agent image, patina/agent:<hash>, in the local Docker engine: the
patina binary as /patina and nothing else, written by patina itself (no registry,
no build), so that its image ID is fixed by the binary's bytes.

A sidecar with --engine swarm runs a workspace on a node only once it has
checked, with this image, that the node's --node-binary is its own binary:
run this on every node with that binary (the default is this executable), or
copy the image the sidecar made on its manager (docker save patina/agent:<hash>
| docker load). A node whose binary is not the sidecar's makes another image,
which the sidecar does not use.`,
		Example: `  patina image agent
  sudo /usr/local/lib/patina/patina image agent --binary /usr/local/lib/patina/patina`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bin == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				bin = exe
			}
			cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
			if err != nil {
				return fmt.Errorf("docker client: %w", err)
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), agentImageTimeout)
			defer cancel()
			tag, id, err := container.LoadAgentImage(ctx, cli, bin)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s %s\n", tag, id)
			return err
		},
	}
	cmd.Flags().StringVar(&bin, "binary", "", "the patina binary (default: this one)")
	return cmd
}
