package tui

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
)

// history is the editor's input history, oldest first, kept in a file
// when it has one.
type history struct {
	items []string
	pos   int    // the entry shown; len(items) is the draft
	draft string // what the editor held before browsing
	file  string // one JSON string per line; "" keeps nothing
	saved int    // lines the file holds
}

// maxHistory bounds the history, in memory and in its file.
const maxHistory = 500

// maxHistoryFile bounds the history file read (a bigger one is ignored).
const maxHistoryFile = 4 << 20

// maxHistoryItem bounds an entry kept in the file.
const maxHistoryItem = 16 << 10

// load reads the history file, if any: its last maxHistory entries. A
// line that is not a JSON string is skipped.
func (h *history) load(file string) {
	h.file = file
	if file == "" {
		return
	}
	fi, err := os.Lstat(file)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxHistoryFile {
		return
	}
	f, err := os.Open(file)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxHistoryItem*8)
	for sc.Scan() {
		var s string
		if json.Unmarshal(sc.Bytes(), &s) == nil && strings.TrimSpace(s) != "" {
			h.items = append(h.items, s)
		}
		h.saved++
	}
	if over := len(h.items) - maxHistory; over > 0 {
		h.items = append([]string(nil), h.items[over:]...)
	}
	h.pos = len(h.items)
}

func (h *history) add(s string) {
	if n := len(h.items); n == 0 || h.items[n-1] != s {
		h.items = append(h.items, s)
		if len(h.items) > maxHistory {
			h.items = h.items[1:]
		}
		h.save(s)
	}
	h.pos, h.draft = len(h.items), ""
}

// save appends s to the file (mode 0600); past twice maxHistory lines the
// file is rewritten with the entries in memory. Errors lose history only.
func (h *history) save(s string) {
	if h.file == "" || len(s) > maxHistoryItem {
		return
	}
	if h.saved >= 2*maxHistory {
		var b strings.Builder
		for _, it := range h.items {
			line, _ := json.Marshal(it)
			b.Write(line)
			b.WriteByte('\n')
		}
		tmp := h.file + ".tmp"
		if os.WriteFile(tmp, []byte(b.String()), 0o600) == nil && os.Rename(tmp, h.file) == nil {
			h.saved = len(h.items)
		}
		return
	}
	if fi, err := os.Lstat(h.file); err == nil && !fi.Mode().IsRegular() {
		return // a FIFO would block the screen; a link is not followed
	}
	f, err := os.OpenFile(h.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return
	}
	f.Chmod(0o600)
	line, _ := json.Marshal(s)
	if _, err := f.Write(append(line, '\n')); err == nil {
		h.saved++
	}
}

// prev steps back from current (kept as the draft when leaving it).
func (h *history) prev(current string) (string, bool) {
	if h.pos == 0 {
		return "", false
	}
	if h.pos == len(h.items) {
		h.draft = current
	}
	h.pos--
	return h.items[h.pos], true
}

// next steps forward, back to the draft at the end.
func (h *history) next() (string, bool) {
	if h.pos >= len(h.items) {
		return "", false
	}
	h.pos++
	if h.pos == len(h.items) {
		return h.draft, true
	}
	return h.items[h.pos], true
}

// search returns the newest entry older than before (an index; len(items)
// for all) that holds query, and its index; -1 when none.
func (h *history) search(query string, before int) (string, int) {
	q := strings.ToLower(query)
	for i := min(before, len(h.items)) - 1; i >= 0; i-- {
		if strings.Contains(strings.ToLower(h.items[i]), q) {
			return h.items[i], i
		}
	}
	return "", -1
}
