//go:build !linux

package container

import (
	"context"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// dialInNetns needs Linux's network namespaces: elsewhere (a sidecar on
// macOS against Docker Desktop) the agents are reached through the exec
// transport.
func dialInNetns(context.Context, *os.File, unix.Sockaddr) (net.Conn, error) {
	return nil, fmt.Errorf("reaching an agent through its network namespace needs Linux: use --agent-transport exec")
}
