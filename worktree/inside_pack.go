package worktree

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Pack writes to w a pack stream of the objects reachable from want and
// not from have (git pack-objects --stdout --revs --thin): what the
// sidecar streams to the host as a Source. Haves the workspace does not
// have are left out of the exclusion. Objects borrowed from the user's
// repository are not excluded unless a have reaches them; the host
// completes thin deltas from its own objects.
func (in *Inside) Pack(ctx context.Context, want, have []string, w io.Writer) error {
	if err := in.pack(ctx, want, have, w); err != nil {
		return fmt.Errorf("pack in %s: %w", in.Dir, err)
	}
	return nil
}

func (in *Inside) pack(ctx context.Context, want, have []string, w io.Writer) error {
	if len(want) == 0 {
		return fmt.Errorf("nothing wanted")
	}
	if err := checkOIDs("want", want); err != nil {
		return err
	}
	if err := checkOIDs("have", have); err != nil {
		return err
	}
	g, err := in.runner()
	if err != nil {
		return err
	}
	var lines []string
	lines = append(lines, want...)
	if len(have) > 0 {
		c := in.cmd(nil, "cat-file", "--batch-check=%(objectname) %(objecttype)")
		c.stdin = strings.NewReader(strings.Join(have, "\n") + "\n")
		out, err := g.run(ctx, c)
		if err != nil {
			return err
		}
		types := parseBatchCheck(string(out))
		for _, h := range have {
			if types[h] == "commit" {
				lines = append(lines, "^"+h)
			}
		}
	}
	c := in.cmd(nil, "pack-objects", "--stdout", "--revs", "--thin", "--delta-base-offset", "-q")
	c.stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	return g.stream(ctx, c, func(r io.Reader) error {
		_, err := io.Copy(w, r)
		return err
	})
}
