package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// fakeAPI is an in-memory ImageAPI. Imports are read to the end as tar
// archives and recorded; pulls answer with pullBody or pullErr.
type fakeAPI struct {
	mu        sync.Mutex
	images    map[string]string // ref -> ID
	inspectFn func(ref string) error
	pullBody  func(ctx context.Context) io.ReadCloser
	pullErr   error
	pulls     []string
	imports   []fakeImport
}

type fakeImport struct {
	ref     string
	opts    image.ImportOptions
	entries map[string]*tar.Header
	content map[string]string
}

func newFakeAPI(present ...string) *fakeAPI {
	f := &fakeAPI{images: map[string]string{}}
	for i, ref := range present {
		f.images[ref] = fmt.Sprintf("sha256:%064d", i+1)
	}
	return f
}

func (f *fakeAPI) ImageInspect(ctx context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	if f.inspectFn != nil {
		if err := f.inspectFn(ref); err != nil {
			return image.InspectResponse{}, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.images[ref]
	if !ok {
		return image.InspectResponse{}, fmt.Errorf("no such image: %s: %w", ref, cerrdefs.ErrNotFound)
	}
	return image.InspectResponse{ID: id, Size: 1234}, nil
}

func (f *fakeAPI) ImageImport(ctx context.Context, src image.ImportSource, ref string, opts image.ImportOptions) (io.ReadCloser, error) {
	imp := fakeImport{ref: ref, opts: opts, entries: map[string]*tar.Header{}, content: map[string]string{}}
	tr := tar.NewReader(src.Source)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("fake import: %w", err)
		}
		imp.entries[hdr.Name] = hdr
		if hdr.Typeflag == tar.TypeReg && hdr.Size < 4096 {
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			imp.content[hdr.Name] = string(b)
		}
	}
	if _, err := io.Copy(io.Discard, src.Source); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imports = append(f.imports, imp)
	id := fmt.Sprintf("sha256:%064x", len(f.imports)+100)
	f.images[ref] = id
	return io.NopCloser(strings.NewReader(`{"status":"` + id + `"}` + "\r\n")), nil
}

func (f *fakeAPI) ImagePull(ctx context.Context, ref string, _ image.PullOptions) (io.ReadCloser, error) {
	f.mu.Lock()
	f.pulls = append(f.pulls, ref)
	f.mu.Unlock()
	if f.pullErr != nil {
		return nil, f.pullErr
	}
	if f.pullBody != nil {
		return f.pullBody(ctx), nil
	}
	return nil, errors.New("fake: no registry")
}

// blockingReader blocks until ctx ends, as a stalled HTTP body does.
type blockingReader struct{ ctx context.Context }

func (r blockingReader) Read([]byte) (int, error) {
	<-r.ctx.Done()
	return 0, r.ctx.Err()
}

func (r blockingReader) Close() error { return nil }
