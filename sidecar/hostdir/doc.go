// Package hostdir makes a host directory given to a workspace safe to
// share with it: Seal makes it a nosuid,nodev bind mount of itself, so no
// file a workspace writes there works as a privilege on the host.
package hostdir
