package inside

import "github.com/patina-dev/patina/sidecar/agent/wire"

// FlagSet is what RunConfig.Flags needs of a flag set: the standard
// library's *flag.FlagSet and cobra's *pflag.FlagSet both are one.
type FlagSet interface {
	StringVar(p *string, name, value, usage string)
	BoolVar(p *bool, name string, value bool, usage string)
}

// Flags defines `agent serve`'s flags on f, with their defaults: the one
// definition of them for every program that runs the agent (patina and
// patina-agent).
func (c *RunConfig) Flags(f FlagSet) {
	f.StringVar(&c.WorkspaceID, "workspace-id", "", "the workspace this agent serves (required)")
	f.StringVar(&c.StateDir, "state-dir", "/.patina/state", "where sessions are kept")
	f.StringVar(&c.Workdir, "workdir", "/workspace", "the workspace's files")
	f.StringVar(&c.Socket, "socket", wire.SocketName, "the abstract socket to listen on")
	f.BoolVar(&c.Takeover, "takeover", false, "kill an agent that holds the socket already")
	f.StringVar(&c.TCP, "tcp", "", "also listen on this TCP address (\":7071\"): on a cluster, the workspace's own overlay network")
	f.StringVar(&c.TokenFile, "token-file", "", "read the token from this file when "+wire.TokenEnv+" is not set (a Swarm secret)")
	f.StringVar(&c.GitName, "git-name", "", "the container's git user.name, unless it has one")
	f.StringVar(&c.GitEmail, "git-email", "", "the container's git user.email, unless it has one")
}

// Exit codes of `agent check-binary`, which the sidecar reads from the
// check's task on a swarm node.
const (
	ExitBinaryDiffers = 3
	ExitBinaryMissing = 4
)
