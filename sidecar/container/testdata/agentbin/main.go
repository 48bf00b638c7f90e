// Command agentbin is a minimal `patina agent` for the container package's
// tests: serve, relay and pause, as the real binary runs them.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/patina-dev/patina/sidecar/agent/inside"
)

func main() {
	args := os.Args[1:]
	if len(args) < 2 || args[0] != "agent" {
		fmt.Fprintln(os.Stderr, "usage: agentbin agent serve|relay|pause")
		os.Exit(2)
	}
	var err error
	switch args[1] {
	case "serve":
		cfg := inside.RunConfig{Version: "test"}
		for i := 2; i < len(args); i++ {
			switch args[i] {
			case "--workspace-id":
				i++
				cfg.WorkspaceID = args[i]
			case "--takeover":
				cfg.Takeover = true
			}
		}
		err = inside.Run(context.Background(), cfg)
	case "relay":
		err = inside.Relay("", os.Stdin, os.Stdout)
	case "pause":
		var cfg inside.PauseConfig
		for i := 2; i < len(args); i++ {
			switch args[i] {
			case "--once":
				cfg.Once = true
			case "--":
				cfg.Keep = args[i+1:]
				i = len(args)
			}
		}
		err = inside.Pause(context.Background(), cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
