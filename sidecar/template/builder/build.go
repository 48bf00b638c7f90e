package builder

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"

	pcontainer "github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/sidecar/template"
)

// dockerfileEntry is where the Dockerfile goes in the context sent to the
// engine (it may live outside the context in the repository).
const dockerfileEntry = ".patina-template.Dockerfile"

// Bounds on a build context.
const maxContextEntries = 100_000

// prepared is a source made ready: its hash and the engine's context.
type prepared struct {
	hash    string
	context string // a temporary tar file: the context's files and the Dockerfile ("": none)
}

// remove deletes the context's file.
func (p prepared) remove() {
	if p.context != "" {
		_ = os.Remove(p.context)
	}
}

// open opens the context's file.
func (p prepared) open() (*os.File, error) { return os.Open(p.context) }

// prepareOne loads and prepares src's context, one at a time (see
// Manager.preparing); the loaded context is dropped once it is on disk.
func (m *Manager) prepareOne(ctx context.Context, src *template.Source) (prepared, error) {
	select {
	case m.preparing <- struct{}{}:
	case <-ctx.Done():
		return prepared{}, ctx.Err()
	}
	defer func() { <-m.preparing }()
	if src.LoadContext != nil && src.Config.Image == "" {
		data, err := src.LoadContext(ctx)
		if err != nil {
			return prepared{}, err
		}
		src.Context = data
	}
	prep, err := m.prepare(*src)
	src.Context, src.LoadContext = nil, nil
	return prep, err
}

// prepare hashes a source and makes its build context. The hash covers
// everything that makes the template: devcontainer.json's bytes, the
// Dockerfile, every file of the context (name, type, mode, link target,
// content), and the base image's id for a config without a build.
func (m *Manager) prepare(src template.Source) (prepared, error) {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte("patina-template/1"))
	field(src.Raw)
	field([]byte(src.Config.Dockerfile))
	field(src.Dockerfile)
	field([]byte(src.BaseImageID))
	if src.Config.Image != "" {
		return prepared{hash: hex.EncodeToString(h.Sum(nil))}, nil
	}
	if int64(len(src.Context)) > m.cfg.MaxContextBytes {
		return prepared{}, fmt.Errorf("%w: the build context %s is larger than %d MiB", template.ErrInvalid, contextName(src.Config.Context), m.cfg.MaxContextBytes>>20)
	}
	f, err := os.CreateTemp(m.cfg.StateDir, "template-context-*.tar")
	if err != nil {
		return prepared{}, fmt.Errorf("write the build context: %w", err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	out := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(out)
	tr := tar.NewReader(bytes.NewReader(src.Context))
	n := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return prepared{}, fmt.Errorf("%w: read the build context: %v", template.ErrInvalid, err)
		}
		if n++; n > maxContextEntries {
			return prepared{}, fmt.Errorf("%w: the build context holds more than %d files", template.ErrInvalid, maxContextEntries)
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
		default:
			continue // git archive's pax headers, and nothing else git makes
		}
		name := path.Clean(hdr.Name)
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") || name == dockerfileEntry {
			continue
		}
		field([]byte{hdr.Typeflag})
		field([]byte(name))
		field([]byte(fmt.Sprintf("%o", hdr.Mode&0o777)))
		field([]byte(hdr.Linkname))
		// The body streams into the hash and the file (no copy held):
		// hashed as field(body) is, its length first.
		size := hdr.Size
		if hdr.Typeflag != tar.TypeReg {
			size = 0
		}
		var n8 [8]byte
		binary.BigEndian.PutUint64(n8[:], uint64(size))
		h.Write(n8[:])
		clean := &tar.Header{Typeflag: hdr.Typeflag, Name: hdr.Name, Linkname: hdr.Linkname, Mode: hdr.Mode & 0o777, Size: size, ModTime: hdr.ModTime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(clean); err != nil {
			return prepared{}, fmt.Errorf("write the build context: %w", err)
		}
		if size > 0 {
			if _, err := io.CopyN(io.MultiWriter(h, tw), tr, size); err != nil {
				return prepared{}, fmt.Errorf("%w: read the build context: %v", template.ErrInvalid, err)
			}
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: dockerfileEntry, Mode: 0o644, Size: int64(len(src.Dockerfile)), Format: tar.FormatPAX}); err != nil {
		return prepared{}, err
	}
	if _, err := tw.Write(src.Dockerfile); err != nil {
		return prepared{}, err
	}
	if err := tw.Close(); err != nil {
		return prepared{}, err
	}
	if err := out.Flush(); err != nil {
		return prepared{}, fmt.Errorf("write the build context: %w", err)
	}
	if err := f.Close(); err != nil {
		return prepared{}, fmt.Errorf("write the build context: %w", err)
	}
	done = true
	return prepared{hash: hex.EncodeToString(h.Sum(nil)), context: f.Name()}, nil
}

func contextName(c string) string {
	if c == "" {
		return "(the repository's root)"
	}
	return c
}

// build makes the template's image: the Dockerfile built (or the image
// taken), then the create commands run in a container of it, which is
// committed as patina-template:<name>.
func (m *Manager) build(ctx context.Context, src template.Source, prep prepared) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.BuildTimeout)
	defer cancel()
	progress := src.Progress
	if progress == nil {
		progress = io.Discard
	}
	base := src.Config.Image
	if base == "" {
		buildTag := "patina-template-build:" + prep.hash[:24]
		if err := m.dockerBuild(ctx, src, prep, buildTag, progress); err != nil {
			return err
		}
		// The committed template keeps the built image as its parent; the
		// tag goes.
		defer func() {
			_, _ = m.api.ImageRemove(context.WithoutCancel(ctx), buildTag, imageUntag)
		}()
		base = buildTag
	}
	spec := template.Spec{
		Repo: src.Repo, Source: src.File, Env: src.Config.Env,
		WorkspaceFolder: src.Config.WorkspaceFolder, ForwardPorts: src.Config.ForwardPorts, Ignored: src.Config.Ignored,
	}
	return m.runCommands(ctx, src, prep, base, spec, progress)
}

// cpuPeriod is the CFS period the build's CPU quota is given in (100 ms).
const cpuPeriod = 100_000

// dockerBuild runs the engine's classic builder: no network (the build is
// offline, from local images checked by checkSource), no host mounts (the
// classic builder has none), memory and CPU bounds, an nproc ulimit,
// nothing pulled.
func (m *Manager) dockerBuild(ctx context.Context, src template.Source, prep prepared, tag string, progress io.Writer) error {
	args := map[string]*string{}
	for _, k := range slices.Sorted(maps.Keys(src.Config.Args)) {
		v := src.Config.Args[k]
		args[k] = &v
	}
	mem := m.cfg.MemoryMB << 20
	cf, err := prep.open()
	if err != nil {
		return &template.BuildError{Step: "build", Err: "read the build context: " + err.Error()}
	}
	defer cf.Close()
	resp, err := m.api.ImageBuild(ctx, cf, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  dockerfileEntry,
		BuildArgs:   args,
		Target:      src.Config.Target,
		Remove:      true,
		ForceRemove: true,
		PullParent:  false,
		NetworkMode: "none",
		Memory:      mem,
		MemorySwap:  mem,
		CPUPeriod:   cpuPeriod,
		CPUQuota:    int64(m.cfg.CPUs * cpuPeriod),
		Ulimits:     []*container.Ulimit{{Name: "nproc", Soft: m.cfg.PidsLimit, Hard: m.cfg.PidsLimit}},
		Version:     build.BuilderV1,
		// No labels: the classic builder would add a step (a container)
		// for each; the committed template carries them.
	})
	if err != nil {
		return &template.BuildError{Step: "build", Err: err.Error()}
	}
	defer resp.Body.Close()
	tail := newTail(m.cfg.TailLines, progress)
	dec := json.NewDecoder(resp.Body)
	var failed string
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Status      string `json:"status"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else if err != nil {
			if ctx.Err() != nil {
				return &template.BuildError{Step: "build", Err: "took longer than " + m.cfg.BuildTimeout.String(), Tail: tail.lines()}
			}
			return &template.BuildError{Step: "build", Err: "read the engine's answer: " + err.Error(), Tail: tail.lines()}
		}
		switch {
		case msg.Error != "":
			failed = msg.Error
			tail.write(msg.Error + "\n")
		case msg.Stream != "":
			tail.write(msg.Stream)
		case msg.Status != "":
			tail.write(msg.Status + "\n")
		}
	}
	tail.flush()
	if failed != "" {
		return &template.BuildError{Step: "build", Err: strings.TrimSpace(failed), Tail: tail.lines()}
	}
	return nil
}

// createScript runs the create commands in order, stopping at the first
// that fails; $1 is the workspaceFolder to link to /workspace ("": none).
const createScript = `set -e
f=$1; shift
if [ -n "$f" ] && [ "$f" != /workspace ] && [ ! -e "$f" ]; then
  mkdir -p "$(dirname "$f")" && ln -s /workspace "$f"
fi
for c in "$@"; do
  printf '+ %s\n' "$c"
  /bin/sh -c "$c"
done
`

// runCommands runs the create commands in a container of base, hardened
// as a workspace is (capabilities, no-new-privileges, limits) and with no
// network, the context's files in a throwaway /workspace, and commits it
// as the template.
func (m *Manager) runCommands(ctx context.Context, src template.Source, prep prepared, base string, spec template.Spec, progress io.Writer) error {
	insp, err := m.api.ImageInspect(ctx, base)
	if err != nil {
		return fmt.Errorf("%w: image %s: %v", template.ErrInvalid, base, err)
	}
	specJSON, _ := json.Marshal(spec)
	labels := map[string]string{template.LabelHash: prep.hash, template.LabelSpec: string(specJSON), pcontainer.LabelManaged: "1"}
	env := make([]string, 0, len(spec.Env))
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	entry := append([]string{"/bin/sh", "-c", createScript, "patina-create", spec.WorkspaceFolder}, src.Config.Commands...)
	pids := m.cfg.PidsLimit
	cfg := &container.Config{
		Image:      base,
		Entrypoint: entry,
		Cmd:        []string{},
		Env:        env,
		WorkingDir: "/workspace",
		Labels:     map[string]string{template.LabelBuild: prep.hash, pcontainer.LabelStateDir: m.cfg.StateDir},
	}
	host := &container.HostConfig{
		Runtime:     m.cfg.Runtime,
		NetworkMode: "none",
		SecurityOpt: []string{"no-new-privileges"},
		CapDrop:     []string{"ALL"},
		CapAdd:      pcontainer.Capabilities,
		Mounts:      []mount.Mount{{Type: mount.TypeVolume, Target: "/workspace"}},
		Resources:   container.Resources{Memory: m.cfg.MemoryMB << 20, MemorySwap: m.cfg.MemoryMB << 20, PidsLimit: &pids, NanoCPUs: int64(m.cfg.CPUs * 1e9)},
	}
	c, err := m.api.ContainerCreate(ctx, cfg, host, nil, nil, "")
	if err != nil {
		return &template.BuildError{Step: "create commands", Err: err.Error()}
	}
	defer func() {
		_ = m.api.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}()
	if prep.context != "" {
		cf, err := prep.open()
		if err != nil {
			return &template.BuildError{Step: "create commands", Err: "read the build context: " + err.Error()}
		}
		err = m.api.CopyToContainer(ctx, c.ID, "/workspace", cf, container.CopyToContainerOptions{})
		cf.Close()
		if err != nil {
			return &template.BuildError{Step: "create commands", Err: "copy the build context in: " + err.Error()}
		}
	}
	waitC, errC := m.api.ContainerWait(ctx, c.ID, container.WaitConditionNextExit)
	if err := m.api.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return &template.BuildError{Step: "create commands", Err: err.Error()}
	}
	tail := newTail(m.cfg.TailLines, progress)
	logs, err := m.api.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err == nil {
		_, _ = stdcopy.StdCopy(tail, tail, logs)
		logs.Close()
	}
	tail.flush()
	var code int64
	select {
	case w := <-waitC:
		code = w.StatusCode
		if w.Error != nil {
			return &template.BuildError{Step: "create commands", Err: w.Error.Message, Tail: tail.lines()}
		}
	case err := <-errC:
		if ctx.Err() != nil {
			return &template.BuildError{Step: "create commands", Err: "took longer than " + m.cfg.BuildTimeout.String(), Tail: tail.lines()}
		}
		return &template.BuildError{Step: "create commands", Err: err.Error(), Tail: tail.lines()}
	}
	if code != 0 {
		return &template.BuildError{Step: "create commands", Err: fmt.Sprintf("exit status %d", code), Tail: tail.lines()}
	}
	commitCfg := &container.Config{Labels: labels, Env: env, WorkingDir: "/workspace", Cmd: []string{"/bin/bash"}, Entrypoint: []string{}}
	if insp.Config != nil {
		commitCfg.Env = append(slices.Clone(insp.Config.Env), env...)
		if len(insp.Config.Cmd) > 0 {
			commitCfg.Cmd = insp.Config.Cmd
		}
		if len(insp.Config.Entrypoint) > 0 {
			commitCfg.Entrypoint = insp.Config.Entrypoint
		}
		if u := insp.Config.User; u != "" {
			commitCfg.User = u
		}
	}
	if _, err := m.api.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: template.Ref(src.Name), Config: commitCfg, Comment: "patina template " + src.Name}); err != nil {
		return fmt.Errorf("save template %s: %w", src.Name, err)
	}
	return nil
}

// tail keeps the last lines written (and passes everything on).
type tail struct {
	mu   sync.Mutex
	max  int
	buf  []string
	part []byte
	out  io.Writer
}

func newTail(max int, out io.Writer) *tail { return &tail{max: max, out: out} }

func (t *tail) Write(p []byte) (int, error) {
	t.write(string(p))
	return len(p), nil
}

func (t *tail) write(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = io.WriteString(t.out, s)
	t.part = append(t.part, s...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			break
		}
		t.add(string(t.part[:i]))
		t.part = t.part[i+1:]
	}
	if len(t.part) > 4096 { // a line without end: keep its last bytes
		t.part = t.part[len(t.part)-4096:]
	}
}

func (t *tail) add(line string) {
	line = strings.TrimRight(line, "\r")
	if len(line) > 1024 {
		line = line[:1024] + "…"
	}
	t.buf = append(t.buf, line)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
}

func (t *tail) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.part) > 0 {
		t.add(string(t.part))
		t.part = nil
	}
}

func (t *tail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.buf)
}

// imageUntag removes a tag and nothing the template still needs.
var imageUntag = image.RemoveOptions{PruneChildren: false}
