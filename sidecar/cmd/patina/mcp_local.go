package main

import (
	"context"
	"errors"
	"log/slog"
)

// localSidecar is a sidecar `patina mcp` started in its own process.
type localSidecar interface {
	Addr() string
	Token() string
	Done() <-chan struct{}
	Shutdown(ctx context.Context) error
}

// localSidecarRequest says how to start one.
type localSidecarRequest struct {
	Addr, StateDir, Token string
	Logger                *slog.Logger
}

// errNoLocalSidecar: this platform runs no sidecar (Windows: run one on
// Linux, in WSL 2 or on another host, and name it with --addr).
var errNoLocalSidecar = errors.New("patina cannot run a sidecar on Windows: run `patina serve` on Linux (in WSL 2, or on another host) and point --addr or PATINA_ADDR at it")
