// Command patina is patina's sidecar and its command-line client.
//
// `patina serve` runs the sidecar: an HTTP API that keeps one Docker
// container per workspace with persistent bash sessions in it. Every other
// command is a client of a running sidecar (through package sidecar/client),
// except `patina image build`, which builds the default workspace image with
// Docker directly, and `patina bench`, which starts a sidecar of its own to
// measure it.
//
// The command tree is built in root.go; each command lives in its own file
// (ws_*.go, exec.go, sessions.go, serve.go, image.go, bench.go). To add a
// command, write a newXCmd(a *app) *cobra.Command and add it in newRootCmd.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default behaviour so that a
		// second Ctrl-C ends patina at once even if something is stuck.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], newApp())
	stop()
	os.Exit(code)
}
