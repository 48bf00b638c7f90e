package session

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"
)

// The watch hub follows files with inotify.

func (h *watchHub) start() error {
	h.init.Do(func() {
		fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
		if err != nil {
			h.err = fmt.Errorf("inotify: %w", err)
			return
		}
		h.fd = fd
		h.f = os.NewFile(uintptr(fd), "inotify")
		h.wds = map[int32]string{}
		h.dirs = map[string]int32{}
		h.subs = map[string]map[*watch]bool{}
		go h.loop()
	})
	return h.err
}

func (h *watchHub) subscribe(path string) (*watch, error) {
	if err := h.start(); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.dirs[dir]; !ok {
		wd, err := syscall.InotifyAddWatch(h.fd, dir, syscall.IN_MODIFY|syscall.IN_CREATE|syscall.IN_CLOSE_WRITE)
		if err != nil {
			return nil, fmt.Errorf("inotify watch %s: %w", dir, err)
		}
		h.dirs[dir] = int32(wd)
		h.wds[int32(wd)] = dir
	}
	w := &watch{hub: h, path: path, events: make(chan struct{}, 1)}
	if h.subs[path] == nil {
		h.subs[path] = map[*watch]bool{}
	}
	h.subs[path][w] = true
	return w, nil
}

func (h *watchHub) loop() {
	buf := make([]byte, 64*1024)
	for {
		n, err := h.f.Read(buf)
		if err != nil {
			return
		}
		h.mu.Lock()
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			dir, ok := h.wds[ev.Wd]
			if !ok {
				continue
			}
			if ev.Mask&syscall.IN_IGNORED != 0 { // the directory went away
				delete(h.wds, ev.Wd)
				delete(h.dirs, dir)
				continue
			}
			for w := range h.subs[filepath.Join(dir, name)] {
				select {
				case w.events <- struct{}{}:
				default:
				}
			}
		}
		h.mu.Unlock()
	}
}
