package inside

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SeedDir is where a template saved from a workspace (`patina ws snapshot`)
// keeps that workspace's files and sessions' state in its image:
// SeedDir/workspace and SeedDir/state.
const SeedDir = "/.patina/seed"

// seedDone, in the state directory, says the seed was planted: never
// again, even if a new container of the workspace's image has the seed
// once more (a container made anew keeps the workspace's disk).
const seedDone = "seed.done"

// plantSeed gives a new workspace the files and sessions' state of the
// template it was made from: seed's workspace/ into workdir and state/
// into stateDir (its agent.log and marker left out), then marks it done
// and removes seed from the container's filesystem. It runs before the
// agent opens the sessions, so that they start from the saved state, and
// before anything of a user ran: what a crash left half-planted is
// planted again whole. A plant that failed is marked done all the same:
// the agent goes on, the workspace's user works in its files, and a
// later try would first remove what they made of the names the seed
// holds. No seed: nothing to do.
func plantSeed(seed, workdir, stateDir string) (bool, error) {
	if _, err := os.Lstat(seed); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	done := filepath.Join(stateDir, seedDone)
	if _, err := os.Lstat(done); err == nil {
		return false, os.RemoveAll(seed)
	}
	err := plant(seed, workdir, stateDir)
	if werr := os.WriteFile(done, nil, 0o600); werr != nil {
		return false, errors.Join(err, fmt.Errorf("plant the template's seed: %w", werr))
	}
	if rerr := os.RemoveAll(seed); err == nil {
		err = rerr
	}
	return err == nil, err
}

func plant(seed, workdir, stateDir string) error {
	for _, p := range []struct{ from, to string }{{filepath.Join(seed, "workspace"), workdir}, {filepath.Join(seed, "state"), stateDir}} {
		entries, err := os.ReadDir(p.from)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read the template's seed: %w", err)
		}
		for _, e := range entries {
			name := e.Name()
			if p.to == stateDir && (strings.HasPrefix(name, "agent.log") || name == seedDone) {
				// This workspace's own: the seed's is dropped.
				if err := os.RemoveAll(filepath.Join(p.from, name)); err != nil {
					return fmt.Errorf("plant the template's seed: %w", err)
				}
				continue
			}
			// A half-planted seed of an earlier try goes first.
			if err := os.RemoveAll(filepath.Join(p.to, name)); err != nil {
				return fmt.Errorf("plant the template's seed: %w", err)
			}
		}
		if err := CopyTree(p.from, p.to); err != nil {
			return fmt.Errorf("plant the template's seed: %w", err)
		}
	}
	return nil
}
