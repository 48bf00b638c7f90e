package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
)

// The system directory is how a sidecar run by root (`sudo patina serve &`,
// as the Quick start has it) is found by the users of the machine, as
// Docker's socket is: root's sidecar publishes its address there
// (sidecar.json, readable by all) and its token (token, mode 0640, owned by
// the group --group, default "patina"), and a client whose own state
// directory shows no running sidecar looks there. Whoever can read the
// token can run commands as root in every workspace: the group is a grant
// of that, like the docker group.
const (
	envSystemDir     = "PATINA_SYSTEM_DIR"
	defaultSystemDir = "/run/patina"
	defaultGroup     = "patina"
)

// systemDir is the system directory clients look in: PATINA_SYSTEM_DIR,
// else /run/patina.
func (a *app) systemDir() string {
	return firstNonEmpty(a.getenv(envSystemDir), defaultSystemDir)
}

// published is what a root sidecar wrote into the system directory, for
// unpublish.
type published struct {
	dir string
	pid int
}

// publishSystem writes the sidecar's address and token into dir for the
// members of group (a name or a numeric gid). Without that group the
// address is published but not the token, and note says how to make the
// group.
func publishSystem(dir, group, addr, token string) (p *published, note string, err error) {
	gid := -1
	if g, err := lookupGroup(group); err == nil {
		gid = g
	} else {
		note = fmt.Sprintf("no group %q: only root can use this sidecar; to let users in, create it and add them "+
			"(sudo groupadd %s; sudo usermod -aG %s USER, then log in again) and restart patina serve", group, group, group)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("system directory %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("system directory %s: %w", dir, err)
	}
	tokenPath := filepath.Join(dir, tokenFile)
	_ = os.Remove(tokenPath) // a token of another sidecar, or another group's
	if gid >= 0 {
		if err := writeOwned(tokenPath, []byte(token+"\n"), 0o640, gid); err != nil {
			return nil, "", err
		}
	}
	b, _ := json.Marshal(discovery{Addr: addr, PID: os.Getpid(), Version: version})
	if err := writeOwned(filepath.Join(dir, discoveryFile), append(b, '\n'), 0o644, -1); err != nil {
		return nil, "", err
	}
	return &published{dir: dir, pid: os.Getpid()}, note, nil
}

// unpublish removes the address (if it is still this process's): the
// clients then no longer try a sidecar that is gone. The token stays: it is
// the same on the next start.
func (p *published) unpublish() {
	if p == nil {
		return
	}
	if d, ok, _ := readDiscovery(p.dir); ok && d.PID == p.pid {
		_ = os.Remove(filepath.Join(p.dir, discoveryFile))
	}
}

// writeOwned writes path through a temporary file with mode and group gid
// (-1: root's), replacing it atomically.
func writeOwned(path string, data []byte, mode fs.FileMode, gid int) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && gid >= 0 {
		err = f.Chown(-1, gid)
	}
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// lookupGroup resolves a group name or a numeric gid.
func lookupGroup(group string) (int, error) {
	if gid, err := strconv.Atoi(group); err == nil && gid >= 0 {
		return gid, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return -1, err
	}
	return strconv.Atoi(g.Gid)
}

// errSystemToken is a system directory whose token this user may not read.
var errSystemToken = errors.New("cannot read the sidecar's token")

// systemTokenError says why the token of root's sidecar is out of reach
// and what to do.
func systemTokenError(path string, err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w: %s is readable only by root and the group it belongs to (%s by default); "+
			"ask for that group (sudo usermod -aG %s $USER, then log in again), or pass --token", errSystemToken, path, defaultGroup, defaultGroup)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: root's sidecar publishes its address in %s but no token (no group %s when it started): "+
			"sudo groupadd %s; sudo usermod -aG %s $USER; log in again and restart patina serve, or pass --token",
			errSystemToken, filepath.Dir(path), defaultGroup, defaultGroup, defaultGroup)
	}
	return fmt.Errorf("%w: %s: %v", errSystemToken, path, err)
}
