package session

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

// history is a session's command history: an append-only file of JSON
// lines, one when a command starts and one when it ends. It is written by
// the driver only; a command that ended while no driver was attached gets
// its end record from its exit file at reattach.
//
// Memory stays bounded however long a session lives: only the newest
// commands are kept in memory (between historyWindow and twice that many,
// compactly, with command texts over historyInline bytes left in the file),
// plus the file offset of one command in historySparse of the older ones.
// Older commands, and long texts, are read back from the file when asked
// for.
type history struct {
	mu   sync.Mutex
	path string
	f    *os.File // appends
	size int64    // where the next record goes

	win    []histEntry // newest commands, ids increasing
	texts  []byte      // the window's short command texts
	sparse []histMark  // older commands: ids increasing
	count  int
	maxID  uint64
}

const (
	historyWindow = 256
	historyInline = 200
	historySparse = 256
	// historyMaxLine bounds one record read back (the agent takes command
	// texts of up to 2 MiB; JSON escaping can double them).
	historyMaxLine = 8 << 20
)

// histMark is where a command's start record is in the file.
type histMark struct {
	id  uint64
	off int64
}

// histEntry is a CommandInfo, compactly: no pointers, so a burst of
// commands leaves no small objects scattered across the heap.
type histEntry struct {
	id             uint64
	off            int64 // of its start record
	started, ended int64 // unix ns
	stdout, stderr int64
	text           int32 // where its text is in texts, unless flagLongCommand
	cmdLen         int32 // the text's length
	exit           int32
	state          uint8 // an index in commandStates
	flags          uint8
}

var commandStates = [...]CommandState{CommandRunning, CommandFinished, CommandLost}

func stateIndex(st CommandState) uint8 {
	for i, s := range commandStates {
		if s == st {
			return uint8(i)
		}
	}
	return 1
}

const (
	flagExit uint8 = 1 << iota
	flagEnded
	flagTimedOut
	flagInterrupted
	flagShellEnded
	flagReplaced
	flagPruned
	flagLongCommand
)

// historyRecord is one line of history.jsonl.
type historyRecord struct {
	Kind string `json:"t"` // "start" or "end"
	CommandInfo
}

// newEntry is ci's entry; a short command text goes to h.texts. Called
// with h.mu held.
func (h *history) newEntry(id uint64, off int64, ci CommandInfo) histEntry {
	e := histEntry{id: id, off: off, cmdLen: int32(min(len(ci.Command), 1<<30))}
	if len(ci.Command) > historyInline {
		e.flags |= flagLongCommand
	} else {
		e.text = int32(len(h.texts))
		h.texts = append(h.texts, ci.Command...)
	}
	e.update(ci)
	return e
}

// update takes what an end record says (all but the id and the text).
func (e *histEntry) update(ci CommandInfo) {
	e.state = stateIndex(ci.State)
	e.started = ci.StartedAt.UnixNano()
	e.stdout, e.stderr = ci.StdoutBytes, ci.StderrBytes
	e.flags &= flagLongCommand
	if ci.EndedAt != nil {
		e.flags |= flagEnded
		e.ended = ci.EndedAt.UnixNano()
	}
	if ci.ExitCode != nil {
		e.flags |= flagExit
		e.exit = int32(*ci.ExitCode)
	}
	for _, b := range []struct {
		on   bool
		flag uint8
	}{{ci.TimedOut, flagTimedOut}, {ci.Interrupted, flagInterrupted}, {ci.Ended, flagShellEnded}, {ci.Replaced, flagReplaced}, {ci.OutputPruned, flagPruned}} {
		if b.on {
			e.flags |= b.flag
		}
	}
}

// info is the entry as a CommandInfo; a long command text is left empty
// (history.text fills it). Called with h.mu held.
func (h *history) info(e histEntry) CommandInfo {
	ci := CommandInfo{
		ID:           strconv.FormatUint(e.id, 10),
		State:        commandStates[e.state],
		StartedAt:    time.Unix(0, e.started).UTC(),
		StdoutBytes:  e.stdout,
		StderrBytes:  e.stderr,
		TimedOut:     e.flags&flagTimedOut != 0,
		Interrupted:  e.flags&flagInterrupted != 0,
		Ended:        e.flags&flagShellEnded != 0,
		Replaced:     e.flags&flagReplaced != 0,
		OutputPruned: e.flags&flagPruned != 0,
	}
	if e.flags&flagLongCommand == 0 {
		ci.Command = string(h.texts[e.text : e.text+e.cmdLen])
	}
	if e.flags&flagEnded != 0 {
		ci.EndedAt = timePtr(time.Unix(0, e.ended).UTC())
	}
	if e.flags&flagExit != 0 {
		ci.ExitCode = intPtr(int(e.exit))
	}
	return ci
}

func openHistory(path string) (*history, error) {
	h := &history{path: path}
	if err := h.load(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open history: %w", err)
	}
	h.f, h.size = f, st.Size()
	return h, nil
}

func (h *history) load() error {
	f, err := os.Open(h.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	defer f.Close()
	return scanHistory(f, 0, func(r historyRecord, id uint64, off int64) bool {
		switch r.Kind {
		case "start":
			r.State = CommandRunning
			h.add(id, off, r.CommandInfo)
		case "end":
			if e := h.find(id); e != nil {
				e.update(r.CommandInfo)
			}
		}
		return true
	})
}

// scanHistory calls fn with each record of the file from off on, and the
// record's offset, until fn returns false. A line that is not a record
// (junk, or torn by a crash mid-write: a last line without its newline is
// one) or is over historyMaxLine is skipped.
func scanHistory(f *os.File, off int64, fn func(r historyRecord, id uint64, off int64) bool) error {
	br := bufio.NewReaderSize(io.NewSectionReader(f, off, 1<<62), 64<<10)
	var line []byte
	lineAt, over := off, false
	for {
		chunk, err := br.ReadSlice('\n')
		off += int64(len(chunk))
		if !over {
			if len(line)+len(chunk) > historyMaxLine {
				over, line = true, line[:0]
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		rec, at, skip := line, lineAt, over
		line, lineAt, over = line[:0], off, false
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if skip {
			continue
		}
		var r historyRecord
		if json.Unmarshal(rec, &r) != nil {
			continue
		}
		id, perr := strconv.ParseUint(r.ID, 10, 64)
		if perr != nil {
			continue
		}
		if !fn(r, id, at) {
			return nil
		}
	}
}

// add appends a started command, keeping the window bounded. Ids only
// grow: a record that does not is ignored. Called with h.mu held (or
// before h is shared).
func (h *history) add(id uint64, off int64, ci CommandInfo) {
	if id <= h.maxID && h.count > 0 {
		return
	}
	if len(h.win) >= 2*historyWindow {
		drop := len(h.win) - historyWindow
		for _, e := range h.win[:drop] {
			if n := len(h.sparse); n == 0 || e.id-h.sparse[n-1].id >= historySparse {
				h.sparse = append(h.sparse, histMark{id: e.id, off: e.off})
			}
		}
		h.win = append(h.win[:0:0], h.win[drop:]...)
		texts := make([]byte, 0, len(h.texts))
		for i := range h.win {
			if e := &h.win[i]; e.flags&flagLongCommand == 0 {
				n := int32(len(texts))
				texts = append(texts, h.texts[e.text:e.text+e.cmdLen]...)
				e.text = n
			}
		}
		h.texts = texts
	}
	h.win = append(h.win, h.newEntry(id, off, ci))
	h.count++
	h.maxID = id
}

// find is id's entry in the window, or nil. Called with h.mu held.
func (h *history) find(id uint64) *histEntry {
	i := sort.Search(len(h.win), func(i int) bool { return h.win[i].id >= id })
	if i < len(h.win) && h.win[i].id == id {
		return &h.win[i]
	}
	return nil
}

// start records a started command.
func (h *history) start(ci CommandInfo) error {
	id, err := strconv.ParseUint(ci.ID, 10, 64)
	if err != nil {
		return fmt.Errorf("history: command id %q is not a number", ci.ID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	off := h.size
	if err := h.write(historyRecord{Kind: "start", CommandInfo: ci}); err != nil {
		return err
	}
	h.add(id, off, ci)
	return nil
}

// end records a finished command.
func (h *history) end(ci CommandInfo) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id, err := strconv.ParseUint(ci.ID, 10, 64); err == nil {
		if e := h.find(id); e != nil {
			e.update(ci)
		}
	}
	rec := ci
	rec.Command = "" // the start record has it
	return h.write(historyRecord{Kind: "end", CommandInfo: rec})
}

// write appends a record. Called with h.mu held.
func (h *history) write(r historyRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	n, err := h.f.Write(b)
	h.size += int64(n)
	if err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// get returns command id's record.
func (h *history) get(id string) (CommandInfo, bool) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 || id != strconv.FormatUint(n, 10) {
		return CommandInfo{}, false
	}
	page := h.page(n-1, 1, 0)
	if len(page) == 0 || page[0].ID != id {
		return CommandInfo{}, false
	}
	return page[0], true
}

// histPage collects a page of history.
type histPage struct {
	out             []CommandInfo
	limit, maxBytes int
	size            int
}

// room says whether a command with a text of n bytes still fits: a page
// holds at least one.
func (p *histPage) room(n int) bool {
	if len(p.out) >= p.limit {
		return false
	}
	return p.maxBytes <= 0 || len(p.out) == 0 || p.size+n+256 <= p.maxBytes
}

func (p *histPage) add(ci CommandInfo, n int) {
	p.out = append(p.out, ci)
	p.size += n + 256
}

// page returns up to limit commands with ids above after, oldest first,
// and, past the first, no more than about maxBytes of them (0: no byte
// bound).
func (h *history) page(after uint64, limit, maxBytes int) []CommandInfo {
	pg := &histPage{limit: limit, maxBytes: maxBytes}
	for {
		h.mu.Lock()
		if len(h.sparse) == 0 || len(h.win) == 0 || after >= h.win[0].id-1 {
			h.windowPage(pg, after) // unlocks
			return pg.out
		}
		// Some are older than the window: from the file, starting at
		// the mark at or before the first wanted.
		i := sort.Search(len(h.sparse), func(i int) bool { return h.sparse[i].id > after+1 })
		off, stop := h.sparse[max(i-1, 0)].off, h.win[0].id
		h.mu.Unlock()
		if !h.readOlder(pg, off, after, stop) {
			return pg.out
		}
		// Everything below stop was read. If the window moved on
		// meanwhile, the file is read again from there.
		after = max(after, stop-1)
	}
}

// windowPage adds the window's commands after `after` to pg. Called with
// h.mu held; it unlocks it (long texts are read from the file after).
func (h *history) windowPage(pg *histPage, after uint64) {
	var long []int
	var offs []int64
	i := sort.Search(len(h.win), func(i int) bool { return h.win[i].id > after })
	for _, e := range h.win[i:] {
		if !pg.room(int(e.cmdLen)) {
			break
		}
		if e.flags&flagLongCommand != 0 {
			long = append(long, len(pg.out))
			offs = append(offs, e.off)
		}
		pg.add(h.info(e), int(e.cmdLen))
	}
	h.mu.Unlock()
	for i, at := range long {
		pg.out[at].Command = h.text(offs[i])
	}
}

// readOlder adds to pg the commands after `after` and below `stop`, read
// from the file from offset off on (not under h.mu: the file is only
// appended to). It reports whether pg has room for more.
func (h *history) readOlder(pg *histPage, off int64, after, stop uint64) bool {
	f, err := os.Open(h.path)
	if err != nil {
		return false
	}
	defer f.Close()
	more := true
	last := after
	err = scanHistory(f, off, func(r historyRecord, id uint64, _ int64) bool {
		switch {
		case r.Kind == "start" && id >= stop:
			return false
		case r.Kind == "start" && id > last:
			if !pg.room(len(r.Command)) {
				more = false
				return false
			}
			r.State = CommandRunning
			pg.add(r.CommandInfo, len(r.Command))
			last = id
		case r.Kind == "end" && id == last && id > after: // last was added by this call
			end := &pg.out[len(pg.out)-1]
			cmd := end.Command
			*end = r.CommandInfo
			end.Command = cmd
			end.State = commandStates[stateIndex(r.State)]
		}
		return true
	})
	return more && err == nil
}

func idOf(ci CommandInfo) uint64 {
	n, _ := strconv.ParseUint(ci.ID, 10, 64)
	return n
}

// text reads the command text of the start record at off.
func (h *history) text(off int64) string {
	f, err := os.Open(h.path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var cmd string
	_ = scanHistory(f, off, func(r historyRecord, _ uint64, _ int64) bool {
		cmd = r.Command
		return false
	})
	return cmd
}

// all returns every command (tests, and small sessions).
func (h *history) all() []CommandInfo {
	var out []CommandInfo
	var after uint64
	for {
		page := h.page(after, 1<<30, 0)
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = idOf(page[len(page)-1])
	}
}

// last returns the newest command, if any.
func (h *history) last() (CommandInfo, bool) {
	h.mu.Lock()
	if len(h.win) == 0 {
		h.mu.Unlock()
		return CommandInfo{}, false
	}
	e := h.win[len(h.win)-1]
	ci := h.info(e)
	h.mu.Unlock()
	// A long text is read from the file, not under h.mu (as in windowPage).
	if e.flags&flagLongCommand != 0 {
		ci.Command = h.text(e.off)
	}
	return ci, true
}

// lastExit is the exit status of the newest finished command with one.
func (h *history) lastExit() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.win) - 1; i >= 0; i-- {
		if e := h.win[i]; commandStates[e.state] != CommandRunning && e.flags&flagExit != 0 {
			return int(e.exit)
		}
	}
	return 0
}

// newest is the largest command id recorded.
func (h *history) newest() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.maxID
}

func (h *history) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

func (h *history) close() error { return h.f.Close() }
