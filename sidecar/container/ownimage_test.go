package container

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

func testImage(t *testing.T, content string) *ownImage {
	t.Helper()
	im, err := newOwnImage("patina-test/own:1", "test", []string{"d"}, []ownFile{{
		name: "d/f", mode: 0o755, size: int64(len(content)),
		open: func() io.Reader { return strings.NewReader(content) },
	}})
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// The image's ID is fixed by its content alone, and its archive is what
// `docker load` takes: a manifest naming the config (whose sha256 is the
// ID) and the layer (whose sha256 the config names).
func TestOwnImageArchive(t *testing.T) {
	a, b, c := testImage(t, "one"), testImage(t, "one"), testImage(t, "two")
	if a.ID() != b.ID() {
		t.Fatalf("exp the same ID for the same content, got %s and %s", a.ID(), b.ID())
	}
	if a.ID() == c.ID() {
		t.Fatal("exp another ID for other content")
	}
	var buf bytes.Buffer
	if err := a.writeArchive(&buf); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(&buf)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		files[hdr.Name] = body
	}
	var manifest []struct {
		Config           string
		RepoTags, Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest: %s %v", files["manifest.json"], err)
	}
	m := manifest[0]
	if cs := sha256.Sum256(files[m.Config]); "sha256:"+hex.EncodeToString(cs[:]) != a.ID() {
		t.Fatalf("exp the config's sha256 to be the ID %s", a.ID())
	}
	var cfg struct {
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(files[m.Config], &cfg); err != nil {
		t.Fatal(err)
	}
	ls := sha256.Sum256(files[m.Layers[0]])
	if exp := []string{"sha256:" + hex.EncodeToString(ls[:])}; fmt.Sprint(cfg.RootFS.DiffIDs) != fmt.Sprint(exp) {
		t.Fatalf("exp diff_ids %v, got %v", exp, cfg.RootFS.DiffIDs)
	}
	if fmt.Sprint(m.RepoTags) != "[patina-test/own:1]" {
		t.Fatalf("tags: %v", m.RepoTags)
	}
	// The layer: the directory, then the file, owned by root.
	lr := tar.NewReader(bytes.NewReader(files[m.Layers[0]]))
	var names []string
	for {
		hdr, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, fmt.Sprintf("%s %o %d", hdr.Name, hdr.Mode, hdr.Uid))
		if hdr.Name == "d/f" {
			if body, _ := io.ReadAll(lr); string(body) != "one" {
				t.Fatalf("the file: %q", body)
			}
		}
	}
	if got := strings.Join(names, ","); got != "d/ 755 0,d/f 755 0" {
		t.Fatalf("layer entries: %s", got)
	}
}

// countingImages counts image loads.
type countingImages struct {
	*client.Client
	loads int
}

func (c *countingImages) ImageLoad(ctx context.Context, r io.Reader, opts ...client.ImageLoadOption) (image.LoadResponse, error) {
	c.loads++
	return c.Client.ImageLoad(ctx, r, opts...)
}

// The engine loads the image under the ID patina computed, with the layer
// patina made; a second ensure finds it without loading it again.
func TestOwnImageLoads(t *testing.T) {
	_, cli := testEngine(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	im := testImage(t, fmt.Sprintf("content %d", time.Now().UnixNano()))
	defer cli.ImageRemove(context.Background(), im.ID(), image.RemoveOptions{Force: true})
	api := &countingImages{Client: cli}
	id, err := ensureOwnImage(ctx, api, im)
	if err != nil {
		t.Fatal(err)
	}
	if id != im.ID() {
		t.Fatalf("exp ID %s, got %s", im.ID(), id)
	}
	info, err := cli.ImageInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if exp := "sha256:" + im.layerDigest; len(info.RootFS.Layers) != 1 || info.RootFS.Layers[0] != exp {
		t.Fatalf("exp the one layer %s, got %v", exp, info.RootFS.Layers)
	}
	if info.Config == nil || info.Config.Labels[LabelRole] != "test" || !strings.Contains(strings.Join(info.RepoTags, ","), "patina-test/own:1") {
		t.Fatalf("labels or tag: %+v %v", info.Config, info.RepoTags)
	}
	if _, err := ensureOwnImage(ctx, api, im); err != nil || api.loads != 1 {
		t.Fatalf("exp one load in all, got %d (%v)", api.loads, err)
	}
}
