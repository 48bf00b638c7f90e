package builder

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"

	"github.com/patina-dev/patina/sidecar/template"
)

// inspectAPI answers ImageInspect from a map and Info with a default
// runtime; any other call panics (API is nil).
type inspectAPI struct {
	API
	images  map[string]image.InspectResponse
	runtime string
}

func (a *inspectAPI) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	if r, ok := a.images[ref]; ok {
		return r, nil
	}
	return image.InspectResponse{}, errdefs.ErrNotFound
}

func (a *inspectAPI) Info(context.Context) (system.Info, error) {
	return system.Info{DefaultRuntime: a.runtime}, nil
}

func TestCheckSource(t *testing.T) {
	api := &inspectAPI{runtime: "runc", images: map[string]image.InspectResponse{
		"base:1":    {ID: "sha256:b", Config: &dockerspec.DockerOCIImageConfig{}},
		"trigger:1": {ID: "sha256:t", Config: &dockerspec.DockerOCIImageConfig{DockerOCIImageConfigExt: dockerspec.DockerOCIImageConfigExt{OnBuild: []string{"ADD http://203.0.113.5/x /x"}}}},
	}}
	df := func(s string) template.Source {
		return template.Source{Config: template.Devcontainer{Dockerfile: "Dockerfile"}, Dockerfile: []byte(s)}
	}
	for _, c := range []struct {
		name    string
		runtime string
		src     template.Source
		want    string // "": accepted
	}{
		{"local", "", df("FROM base:1\nRUN true\n"), ""},
		{"missing", "", df("FROM base:1\nCOPY --from=gone:1 /a /a\n"), "gone:1 is not on the engine"},
		{"onbuild", "", df("FROM trigger:1\n"), "ONBUILD"},
		{"image", "", template.Source{Config: template.Devcontainer{Image: "gone:2"}}, "gone:2 is not on the engine"},
		{"runsc-run", "runsc", df("FROM base:1\nRUN true\n"), "under its default runtime runc, not this sidecar's runsc"},
		{"runsc-no-run", "runsc", df("FROM base:1\nCOPY a /a\n"), ""},
		{"runc-run", "runc", df("FROM base:1\nRUN true\n"), ""},
	} {
		m := New(Config{Runtime: c.runtime}, api)
		src := c.src
		err := m.checkSource(context.Background(), &src)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, template.ErrInvalid) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
	}
	src := template.Source{Config: template.Devcontainer{Image: "base:1"}}
	if err := New(Config{}, api).checkSource(context.Background(), &src); err != nil || src.BaseImageID != "sha256:b" {
		t.Fatalf("image: %v, base id %q", err, src.BaseImageID)
	}
}
