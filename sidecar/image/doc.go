// Package image owns patina's workspace images: it finds out whether an image
// is present, pulls it when a registry can be reached, and builds patina's
// default image, patina/base:bookworm, without any registry at all.
//
// Why offline: patina must run where no container registry is reachable (CI
// machines, air-gapped hosts) and a Docker engine there starts with no images.
// So the default image is made from the Debian mirror the host already uses:
// debootstrap writes a minimal Debian root filesystem (minbase plus bash,
// coreutils, git, ca-certificates, procps, vim-tiny and less) into a temporary directory, the
// apt caches are dropped, and the tree is streamed as a tar archive into
// Docker's image import. The mirror is read from the host's apt configuration
// (see [Mirror]); no host name is built in.
//
// [Manager.Ensure] is what the sidecar calls before creating a workspace: it
// succeeds when the image is present or can be pulled, and otherwise returns an
// error wrapping [ErrMissing] that names the command which builds the image.
// [Manager.Build] does the build (Linux, root and debootstrap needed); builds of one
// tag are serialised across processes with a lock file. [EnsureBuilt] is the
// helper tests in other packages call to get the default image.
//
// DESIGN.md beside this file records the choices and the figures behind them.
package image
