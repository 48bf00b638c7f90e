package container

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// ImageAPI is what loading patina's own images needs of Docker.
type ImageAPI interface {
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageLoad(ctx context.Context, input io.Reader, opts ...client.ImageLoadOption) (image.LoadResponse, error)
}

// ownImage is an image patina makes itself, from a tar it writes (never
// from a registry, a Dockerfile or a workspace), in `docker save` format:
// every byte of it, its config included, is fixed by its content, so its
// ID, the sha256 of the config, is known before the engine sees it. The
// engine computes that ID itself from what it loads and checks each layer
// against the config's digest of it, so an image found on an engine under
// this ID holds exactly these files.
type ownImage struct {
	tag   string
	role  string // LabelRole of the image
	dirs  []string
	files []ownFile

	layerSize   int64
	layerDigest string // hex
	config      []byte
}

// ownFile is a regular file of an ownImage, owned by root.
type ownFile struct {
	name string // path in the image, without a leading /
	mode int64
	size int64
	// open returns the file's content, exactly size bytes (a new reader
	// each time: the layer is written twice, once to hash it).
	open func() io.Reader
}

// newOwnImage computes the image's layer digest and config (reading each
// file once).
func newOwnImage(tag, role string, dirs []string, files []ownFile) (*ownImage, error) {
	im := &ownImage{tag: tag, role: role, dirs: dirs, files: files}
	h := sha256.New()
	n := &countWriter{w: h}
	if err := im.writeLayer(n); err != nil {
		return nil, err
	}
	im.layerSize, im.layerDigest = n.n, hex.EncodeToString(h.Sum(nil))
	cfg := map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC(),
		"config":       map[string]any{"Labels": map[string]string{LabelManaged: "1", LabelRole: role}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + im.layerDigest}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	im.config = b
	return im, nil
}

// ID is the image's ID ("sha256:…").
func (im *ownImage) ID() string {
	s := sha256.Sum256(im.config)
	return "sha256:" + hex.EncodeToString(s[:])
}

// writeLayer writes the layer's tar: the directories, then the files, all
// dated 1970 and owned by root.
func (im *ownImage) writeLayer(w io.Writer) error {
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	for _, d := range im.dirs {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
	}
	for _, f := range im.files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: f.size, ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
		n, err := io.Copy(tw, io.LimitReader(f.open(), f.size))
		if err != nil {
			return err
		}
		if n != f.size {
			return fmt.Errorf("%s: read %d bytes, want %d", f.name, n, f.size)
		}
	}
	return tw.Close()
}

// writeArchive writes the image as `docker save` makes it: the layer, the
// config and the manifest naming them and the tag.
func (im *ownImage) writeArchive(w io.Writer) error {
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	file := func(name string, size int64, body func(io.Writer) error) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		return body(tw)
	}
	layer := im.layerDigest + "/layer.tar"
	if err := tw.WriteHeader(&tar.Header{Name: im.layerDigest + "/", Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir}); err != nil {
		return err
	}
	if err := file(layer, im.layerSize, im.writeLayer); err != nil {
		return err
	}
	cfgName := strings.TrimPrefix(im.ID(), "sha256:") + ".json"
	if err := file(cfgName, int64(len(im.config)), func(w io.Writer) error { _, err := w.Write(im.config); return err }); err != nil {
		return err
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{im.tag}, "Layers": []string{layer}}})
	if err != nil {
		return err
	}
	if err := file("manifest.json", int64(len(manifest)), func(w io.Writer) error { _, err := w.Write(manifest); return err }); err != nil {
		return err
	}
	return tw.Close()
}

// fillImageTag names the image of the agent volume's fill container: an
// empty directory /agent, and nothing else.
const fillImageTag = "patina/agent-fill:1"

// fillImage makes sure the engine has the fill image and returns its ID:
// the fill container is made from it, never from an image a workspace
// could have chosen or committed.
func (d *Docker) fillImage(ctx context.Context) (string, error) {
	d.fillOnce.Do(func() {
		d.fill, d.fillErr = newOwnImage(fillImageTag, "agent-fill", []string{"agent"}, nil)
	})
	if d.fillErr != nil {
		return "", d.fillErr
	}
	return ensureOwnImage(ctx, d.api, d.fill)
}

// ensureOwnImage makes sure the engine has im, loading it if it has not,
// and returns its ID. It never pulls.
func ensureOwnImage(ctx context.Context, api ImageAPI, im *ownImage) (string, error) {
	id := im.ID()
	if _, err := api.ImageInspect(ctx, id); err == nil {
		return id, nil
	} else if !errdefs.IsNotFound(err) {
		return "", fmt.Errorf("inspect image %s: %w", im.tag, err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(im.writeArchive(pw)) }()
	resp, err := api.ImageLoad(ctx, pr, client.ImageLoadWithQuiet(true))
	if err != nil {
		pr.CloseWithError(err)
		return "", fmt.Errorf("load image %s: %w", im.tag, err)
	}
	msg := loadError(resp.Body)
	resp.Body.Close()
	pr.Close()
	if msg != "" {
		return "", fmt.Errorf("load image %s: %s", im.tag, msg)
	}
	if _, err := api.ImageInspect(ctx, id); err != nil {
		return "", fmt.Errorf("load image %s: the engine does not have it as %s after loading it: %w", im.tag, id, err)
	}
	return id, nil
}

// loadError is the error an image load's answer reports ("" if none). It
// reads at most 1 MiB of it.
func loadError(r io.Reader) string {
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.ErrorDetail.Message != "" {
			return m.ErrorDetail.Message
		}
		if m.Error != "" {
			return m.Error
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err.Error()
	}
	return ""
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
