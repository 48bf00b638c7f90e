//go:build !linux

package session

import "errors"

// errNoWatch: following a command's output needs Linux's inotify
// (sessions run inside workspaces, on Linux).
var errNoWatch = errors.New("following output needs Linux")

func (h *watchHub) start() error { return errNoWatch }

func (h *watchHub) subscribe(string) (*watch, error) { return nil, errNoWatch }
