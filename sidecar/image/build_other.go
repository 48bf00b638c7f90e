//go:build !linux

package image

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Build needs Linux (debootstrap, chroot, flock, mount namespaces); here it
// only finds a present image when req.IfMissing is set.
func (m *Manager) Build(ctx context.Context, req BuildRequest) (BuildResult, error) {
	start := time.Now()
	req = req.withDefaults(m.cfg)
	if err := req.validate(); err != nil {
		return BuildResult{}, err
	}
	if req.IfMissing {
		id, size, ok, err := m.inspect(ctx, req.Tag)
		if err != nil {
			return BuildResult{}, err
		}
		if ok {
			return BuildResult{ID: id, Tag: req.Tag, Size: size, Duration: time.Since(start)}, nil
		}
	}
	return BuildResult{}, fmt.Errorf("image build %s: building images needs Linux: %w", req.Tag, errors.ErrUnsupported)
}
