//go:build linux

package image

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/image"
)

// Build makes an image with debootstrap and imports it into Docker under
// req.Tag. It needs root and debootstrap; the mirror is the request's or the
// one the host's apt configuration names. The steps: take the tag's build
// lock (another process may be building it), run debootstrap --variant=minbase
// --include=<packages> into a temporary directory with its output streamed
// to req.Progress, drop apt's caches and lists, stream the tree as a tar into
// Docker's image import with CMD, ENV, WORKDIR and patina's labels set, and
// remove the directory (also on failure and cancellation).
//
// With req.IfMissing a present image is returned as it is (Built false),
// checked before and again after taking the lock.
func (m *Manager) Build(ctx context.Context, req BuildRequest) (BuildResult, error) {
	start := time.Now()
	req = req.withDefaults(m.cfg)
	if err := req.validate(); err != nil {
		return BuildResult{}, err
	}
	progress := req.Progress
	if progress == nil {
		progress = io.Discard
	}
	found := func(id string, size int64) (BuildResult, error) {
		return BuildResult{ID: id, Tag: req.Tag, Size: size, Duration: time.Since(start)}, nil
	}
	if req.IfMissing {
		if id, size, ok, err := m.inspect(ctx, req.Tag); err != nil || ok {
			if err != nil {
				return BuildResult{}, err
			}
			return found(id, size)
		}
	}
	debootstrap, err := m.prerequisites(req.TempDir)
	if err != nil {
		return BuildResult{}, err
	}
	if req.Mirror == "" {
		if req.Mirror, err = Mirror(m.cfg.Apt, req.Suite); err != nil {
			return BuildResult{}, fmt.Errorf("image build %s: %w (or name one with a mirror URL)", req.Tag, err)
		}
	} else if err := validMirror(req.Mirror); err != nil {
		return BuildResult{}, err
	}

	unlock, err := lockTag(ctx, m.cfg.LockDir, req.Tag, m.cfg.LockPoll, m.log)
	if err != nil {
		return BuildResult{}, err
	}
	defer unlock()
	if req.IfMissing {
		if id, size, ok, err := m.inspect(ctx, req.Tag); err != nil || ok {
			if err != nil {
				return BuildResult{}, err
			}
			fmt.Fprintf(progress, "==> %s was built by another process meanwhile\n", req.Tag)
			return found(id, size)
		}
	}

	dir, err := os.MkdirTemp(req.TempDir, "patina-rootfs-")
	if err != nil {
		return BuildResult{}, fmt.Errorf("image build %s: %w", req.Tag, err)
	}
	defer func() {
		fmt.Fprintf(progress, "==> removing %s\n", dir)
		if err := removeRootfs(dir); err != nil {
			m.log.Error("could not remove the temporary root filesystem", "dir", dir, "err", err)
		}
	}()
	if err := os.Chmod(dir, 0o755); err != nil { // becomes the image's "/"
		return BuildResult{}, fmt.Errorf("image build %s: %w", req.Tag, err)
	}

	log := m.log.With("tag", req.Tag, "suite", req.Suite, "mirror", req.Mirror)
	log.Info("image build started", "dir", dir, "packages", strings.Join(req.Packages, ","))
	fmt.Fprintf(progress, "==> building %s: debootstrap %s (minbase + %s) from %s into %s\n",
		req.Tag, req.Suite, strings.Join(req.Packages, ","), req.Mirror, dir)
	if err := seedRootfs(dir); err != nil {
		return BuildResult{}, fmt.Errorf("image build %s: %w", req.Tag, err)
	}
	step := time.Now()
	if err := m.debootstrap(ctx, debootstrap, req, dir, progress); err != nil {
		return BuildResult{}, fmt.Errorf("image build %s: %w", req.Tag, err)
	}
	log.Info("debootstrap finished", "duration", time.Since(step).Round(time.Millisecond))
	if err := scrubRootfs(dir); err != nil {
		return BuildResult{}, fmt.Errorf("image build %s: %w", req.Tag, err)
	}
	fmt.Fprintf(progress, "==> importing %s into Docker\n", req.Tag)
	step = time.Now()
	if err := m.importRootfs(ctx, dir, req); err != nil {
		return BuildResult{}, fmt.Errorf("image build %s: %w", req.Tag, err)
	}
	id, size, ok, err := m.inspect(ctx, req.Tag)
	if err != nil {
		return BuildResult{}, fmt.Errorf("image build %s: %w", req.Tag, err)
	}
	if !ok {
		return BuildResult{}, fmt.Errorf("image build %s: imported, but the tag is not present", req.Tag)
	}
	res := BuildResult{ID: id, Tag: req.Tag, Size: size, Mirror: req.Mirror, Built: true, Duration: time.Since(start)}
	log.Info("image built", "id", id, "size", size, "import", time.Since(step).Round(time.Millisecond), "duration", res.Duration.Round(time.Millisecond))
	fmt.Fprintf(progress, "==> built %s (%s, %.0f MB) in %s\n", req.Tag, shortID(id), float64(size)/1e6, res.Duration.Round(100*time.Millisecond))
	return res, nil
}

// prerequisites checks that a build can run here and returns the path of
// debootstrap.
func (m *Manager) prerequisites(tempDir string) (string, error) {
	var errs []error
	if uid := os.Geteuid(); uid != 0 {
		errs = append(errs, fmt.Errorf("%w (debootstrap must chroot, chown and create device nodes): running as uid %d; run it as root, e.g. with sudo", ErrNotRoot, uid))
	}
	path, err := m.findDebootstrap()
	if err != nil {
		errs = append(errs, err)
	}
	if err := checkBuildDir(tempDir); err != nil {
		errs = append(errs, err)
	}
	return path, errors.Join(errs...)
}

func (m *Manager) findDebootstrap() (string, error) {
	name := m.cfg.Debootstrap
	if name == "" {
		name = "debootstrap"
	}
	if path, err := exec.LookPath(name); err == nil {
		return path, nil
	}
	if m.cfg.Debootstrap == "" { // root's PATH has /usr/sbin, a user's may not
		if fi, err := os.Stat("/usr/sbin/debootstrap"); err == nil && fi.Mode()&0o111 != 0 {
			return "/usr/sbin/debootstrap", nil
		}
	}
	return "", fmt.Errorf("%w (%s): install it with: apt-get install -y debootstrap", ErrNoDebootstrap, name)
}

// outputDrainWait is how long debootstrap's output is read after it and
// its process group are gone: only a child that escaped the group can
// still hold the pipe.
const outputDrainWait = 2 * time.Second

// debootstrap runs debootstrap into dir, copying its output to progress line
// by line. It runs in its own process group, which is killed when ctx ends
// (debootstrap's chrooted dpkg and friends with it) and when it exits (so no
// stray child keeps its output open).
func (m *Manager) debootstrap(ctx context.Context, path string, req BuildRequest, dir string, progress io.Writer) error {
	args := []string{"--variant=minbase", "--include=" + strings.Join(req.Packages, ","), req.Suite, dir, req.Mirror}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = buildEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pw.Close()
		return fmt.Errorf("debootstrap: %w", err)
	}
	pw.Close()

	tail := &lineTail{max: 30}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		r := bufio.NewReader(pr)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				line = bytes.TrimRight(line, "\r\n")
				tail.add(string(line))
				m.log.Debug("debootstrap", "line", string(line))
				progress.Write(append(line, '\n'))
			}
			if err != nil {
				return
			}
		}
	}()
	waitErr := cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers of the group, if any
	select {
	case <-copied:
	case <-time.After(outputDrainWait): // a child escaped the group and holds the pipe
		pr.Close()
		<-copied
	}
	if ctx.Err() != nil {
		return fmt.Errorf("debootstrap: %w", ctx.Err())
	}
	if waitErr != nil {
		ce := &CommandError{Args: append([]string{"debootstrap"}, args...), ExitCode: -1, Output: tail.String()}
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			ce.ExitCode = ee.ExitCode()
		}
		ce.Log = fileTail(filepath.Join(dir, "debootstrap", "debootstrap.log"), 30)
		return ce
	}
	return nil
}

// buildEnv is debootstrap's environment: the caller's (proxy settings count)
// with a PATH that has the sbin directories and a C locale.
func buildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "LANG", "LANGUAGE", "LC_ALL", "DEBIAN_FRONTEND":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
}

// importChanges are the Dockerfile instructions applied at import.
func importChanges(req BuildRequest) []string {
	return []string{
		`CMD ["/bin/bash"]`,
		"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"ENV LANG=C.UTF-8",
		"WORKDIR /",
		"LABEL " + LabelImage + "=base",
		"LABEL " + LabelSuite + "=" + req.Suite,
		"LABEL " + LabelPackages + "=" + strings.Join(req.Packages, ","),
	}
}

// importRootfs streams dir as a tar into Docker's image import. The contents
// of /dev, /proc and /sys are left out: Docker mounts its own there, and an
// engine without the right to create device nodes (rootless) could not
// import them.
func (m *Manager) importRootfs(ctx context.Context, dir string, req BuildRequest) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	tarDone := make(chan error, 1)
	go func() {
		err := writeTar(ctx, pw, dir, skipUnder("dev", "proc", "sys"))
		pw.CloseWithError(err)
		tarDone <- err
	}()
	opts := image.ImportOptions{
		Message: fmt.Sprintf("patina: debootstrap --variant=minbase %s + %s", req.Suite, strings.Join(req.Packages, ",")),
		Changes: importChanges(req),
	}
	rc, err := m.api.ImageImport(ctx, image.ImportSource{Source: pr, SourceName: "-"}, req.Tag, opts)
	if err == nil {
		err = readMessages(rc, nil)
		rc.Close()
	}
	pr.CloseWithError(errors.New("import ended"))
	tarErr := <-tarDone
	if tarErr != nil {
		return fmt.Errorf("image import: %w", tarErr)
	}
	if err != nil {
		return fmt.Errorf("image import: %w", err)
	}
	return nil
}

// lineTail keeps the last max lines written to it.
type lineTail struct {
	max   int
	lines []string
}

func (t *lineTail) add(line string) {
	if len(t.lines) == t.max {
		t.lines = append(t.lines[:0], t.lines[1:]...)
	}
	t.lines = append(t.lines, line)
}

func (t *lineTail) String() string { return strings.Join(t.lines, "\n") }

// fileTail returns the last n lines of a file, or "".
func fileTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}
