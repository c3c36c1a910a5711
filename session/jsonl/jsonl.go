// Package jsonl stores sessions as JSON Lines files, one per session, at
// <root>/<project-key>/<encoded-id>.jsonl: the header record on line 1, then
// one event per line. Every session of a working directory, a delegation
// tree's children too, is a file in one project directory, made once, so a
// new session costs one file and no directory. Sessions written by earlier
// builds, at <root>/<project-key>/<encoded-id>/session.jsonl, are found,
// listed, read and resumed in place. A file appears whole at the session's
// first Append (written under a temporary name, then linked into place) and
// is only ever appended to. Writes are not fsynced: a log survives a process
// crash intact, and the torn last line a system crash can leave is dropped
// on load.
//
// The process writing a session holds an exclusive flock(2) on its file for
// as long as it writes; the kernel releases it however the process ends.
// Readers (Read) open files read-only and change nothing: the lock tells
// them a running session from a crashed one. Only a writer that takes the
// lock (Load) repairs a file.
package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/dsh-go/dsh/session"
)

// Backend is a session.Backend over a directory tree. It is safe for
// concurrent use; each persister it returns serves one session.
type Backend struct {
	root  string
	write func(f *os.File, b []byte) (int, error) // test hook; nil means f.Write

	mu    sync.Mutex
	known map[string]string // session id → file, built by one scan on first use
}

var _ session.Backend = (*Backend)(nil)

// New returns a backend storing sessions under root, typically
// DefaultRoot's result. The directory is created when first needed.
func New(root string) *Backend { return &Backend{root: root} }

// Durable implements session.Durable: files outlive the process.
func (b *Backend) Durable() bool { return true }

// DefaultRoot returns $DSH_HOME/sessions, where DSH_HOME defaults to ~/.dsh.
// getenv looks up environment variables (os.Getenv when nil).
func DefaultRoot(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	home := getenv("DSH_HOME")
	if home == "" {
		dir, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("jsonl: default root: %w", err)
		}
		home = filepath.Join(dir, ".dsh")
	}
	return filepath.Join(home, "sessions"), nil
}

// Path returns the file a new session with header h is written to.
func (b *Backend) Path(h session.Header) string {
	return filepath.Join(b.root, ProjectKey(h.Cwd), EncodeID(h.ID)+Ext)
}

// paths returns the two places a session id can be stored in project
// directory dir: a file (this layout) and a directory (the earlier one).
func paths(dir, enc string) (file, legacy string) {
	return filepath.Join(dir, enc+Ext), filepath.Join(dir, enc, FileName)
}

// entryPath returns the session file an entry of a project directory
// stands for and the id its name encodes; ok is false for other entries
// (temporary files, strays).
func entryPath(dir string, e fs.DirEntry) (path, id string, ok bool) {
	name := e.Name()
	if e.IsDir() {
		id, ok = DecodeID(name)
		return filepath.Join(dir, name, FileName), id, ok
	}
	enc, found := strings.CutSuffix(name, Ext)
	if !found {
		return "", "", false
	}
	id, ok = DecodeID(enc)
	return filepath.Join(dir, name), id, ok
}

// headerRecord is line 1 of a session file.
type headerRecord struct {
	Type string `json:"type"` // always recordType
	session.Header
}

const recordType = "session"

// Create implements session.Backend. It refuses an id already stored
// anywhere under the root; the file appears at the first Append.
func (b *Backend) Create(h session.Header) (session.Persister, error) {
	if h.ID == "" {
		return nil, &session.Error{Code: session.CodeInvalidHeader, Msg: "jsonl: header has no id"}
	}
	path := b.Path(h)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.index(); err != nil {
		return nil, err
	}
	stored, ok := b.known[h.ID]
	if !ok { // written by another process since the scan?
		stored, ok = stat(paths(filepath.Dir(path), EncodeID(h.ID)))
	}
	if ok {
		return nil, &session.Error{Code: session.CodeExists, Msg: fmt.Sprintf("session %s is already stored at %s", h.ID, stored)}
	}
	b.known[h.ID] = path // reserved: a second Create of the id is refused
	return &persister{b: b, path: path, header: h}, nil
}

// index scans the stored sessions once, so that Create need not visit
// every project directory (one per working directory ever used) for each
// new session. b.mu must be held.
func (b *Backend) index() error {
	if b.known != nil {
		return nil
	}
	known := map[string]string{}
	projects, err := os.ReadDir(b.root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("jsonl: %w", err)
	}
	for _, p := range projects {
		dir := filepath.Join(b.root, p.Name())
		sessions, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, s := range sessions {
			path, id, ok := entryPath(dir, s)
			if !ok {
				continue
			}
			if s.IsDir() { // earlier layout: the directory may be empty
				if _, err := os.Stat(path); err != nil {
					continue
				}
			}
			known[id] = path
		}
	}
	b.known = known
	return nil
}

// find returns the file of session id, scanning every project directory.
func (b *Backend) find(id string) (string, error) {
	if id != "" {
		enc := EncodeID(id)
		dirs, err := os.ReadDir(b.root)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("jsonl: %w", err)
		}
		for _, d := range dirs {
			if path, ok := stat(paths(filepath.Join(b.root, d.Name()), enc)); ok {
				return path, nil
			}
		}
	}
	return "", &session.Error{Code: session.CodeNotFound, Msg: fmt.Sprintf("no stored session %q under %s", id, b.root)}
}

// Load implements session.Backend for a writer. It takes the session's
// writer lock, held until the persister is closed, and refuses a session
// another live writer holds (CodeBusy). A torn last line is dropped and cut
// from the file; any other unreadable line, an unsupported version, an
// unknown required event type or a structurally broken log is refused with
// an error naming the file (and line). The persister appends after the
// kept content.
func (b *Backend) Load(id string) (session.Header, []session.Event, session.Persister, error) {
	path, err := b.find(id)
	if err != nil {
		return session.Header{}, nil, nil, err
	}
	f, err := openRegular(path, os.O_RDWR|os.O_APPEND)
	if err != nil {
		return session.Header{}, nil, nil, err
	}
	if err := lockWriter(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return session.Header{}, nil, nil, &session.Error{Code: session.CodeBusy, Msg: fmt.Sprintf("%s is being written by a live process", path)}
		}
		return session.Header{}, nil, nil, fmt.Errorf("jsonl: lock %s: %w", path, err)
	}
	h, events, size, err := readLog(f, path, id)
	if err != nil {
		f.Close()
		return session.Header{}, nil, nil, err
	}
	return h, events, &persister{b: b, path: path, header: h, f: f, size: size, next: int64(len(events))}, nil
}

// Read implements session.Reader: it opens the file read-only and never
// writes to it. live reports whether a writer holds the session's lock.
func (b *Backend) Read(id string) (h session.Header, events []session.Event, live bool, err error) {
	path, err := b.find(id)
	if err != nil {
		return h, nil, false, err
	}
	f, err := openRegular(path, os.O_RDONLY)
	if err != nil {
		return h, nil, false, err
	}
	defer f.Close()
	if live, err = writerAlive(f); err != nil {
		return h, nil, false, fmt.Errorf("jsonl: lock %s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return h, nil, false, fmt.Errorf("jsonl: %w", err)
	}
	h, events, _, err = parseLog(data, path, id, live)
	return h, events, live, err
}

// readLog reads a whole session file for its writer and repairs its tail: a
// torn last line is truncated away, and a newline is added after a last
// line lacking one. It returns the size of the kept content.
func readLog(f *os.File, path, id string) (h session.Header, events []session.Event, size int64, err error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return h, nil, 0, fmt.Errorf("jsonl: %w", err)
	}
	if h, events, size, err = parseLog(data, path, id, false); err != nil {
		return h, nil, 0, err
	}
	switch {
	case size < int64(len(data)):
		if err := f.Truncate(size); err != nil {
			return h, nil, 0, fmt.Errorf("jsonl: drop torn last line: %w", err)
		}
	case data[len(data)-1] != '\n':
		if _, err := f.Write([]byte{'\n'}); err != nil {
			return h, nil, 0, fmt.Errorf("jsonl: end last line: %w", err)
		}
		size++
	}
	return h, events, size, nil
}

// parseLog decodes the content of a session file and returns the size of
// the part it kept. A last line without its newline is left out when a live
// writer may still be writing it, or when it is not valid JSON (torn by a
// crash). Large logs are decoded on every core.
func parseLog(data []byte, path, id string, live bool) (h session.Header, events []session.Event, size int64, err error) {
	lines := splitLines(data)
	if len(lines) == 0 {
		return h, nil, 0, corrupt(path, 1, errors.New("no header record"))
	}
	if h, err = parseHeader(lines[0], path); err != nil {
		return h, nil, 0, err
	}
	if h.ID != id {
		return h, nil, 0, corrupt(path, 1, fmt.Errorf("header id %q, want %q", h.ID, id))
	}
	size = int64(len(data))
	lines = lines[1:]
	if n := len(lines); n > 0 && live && lines[n-1][len(lines[n-1])-1] != '\n' {
		size -= int64(len(lines[n-1]))
		lines = lines[:n-1]
	}
	events = make([]session.Event, len(lines))
	errs := decodeAll(lines, events)
	for i, line := range lines {
		if errs[i] != nil {
			if i == len(lines)-1 && !json.Valid(line) {
				events, size = events[:i], size-int64(len(line))
				break
			}
			return h, nil, 0, corrupt(path, i+2, errs[i])
		}
		if events[i].Seq != int64(i) {
			return h, nil, 0, corrupt(path, i+2, fmt.Errorf("event has seq %d, want %d", events[i].Seq, i))
		}
	}
	if err := session.Expand(events); err != nil {
		return h, nil, 0, &session.Error{Code: session.CodeCorrupt, Msg: fmt.Sprintf("%s: %v", path, err)}
	}
	if _, err := session.Repair(events); err != nil {
		return h, nil, 0, &session.Error{Code: session.CodeCorrupt, Msg: fmt.Sprintf("%s: %v", path, err)}
	}
	return h, events, size, nil
}

// splitLines cuts data into lines, each with its '\n' except perhaps the last.
func splitLines(data []byte) [][]byte {
	lines := make([][]byte, 0, bytes.Count(data, []byte{'\n'})+1)
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, data)
			break
		}
		lines = append(lines, data[:i+1])
		data = data[i+1:]
	}
	return lines
}

// decodeAll decodes lines into events, in parallel for large logs, and
// returns each line's error.
func decodeAll(lines [][]byte, events []session.Event) []error {
	errs := make([]error, len(lines))
	decode := func(from, to int) {
		var d session.Decoder
		for i := from; i < to; i++ {
			events[i], errs[i] = d.Decode(lines[i])
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(lines)/4096)
	if workers < 2 {
		decode(0, len(lines))
		return errs
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { decode(w*len(lines)/workers, (w+1)*len(lines)/workers) })
	}
	wg.Wait()
	return errs
}

// parseHeader decodes line 1 of the file at path.
func parseHeader(line []byte, path string) (session.Header, error) {
	var rec headerRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		return session.Header{}, corrupt(path, 1, err)
	}
	if rec.Type != recordType {
		return session.Header{}, corrupt(path, 1, fmt.Errorf("record type %q, want %q", rec.Type, recordType))
	}
	if rec.Version != session.FormatVersion {
		return session.Header{}, &session.Error{Code: session.CodeFormat,
			Msg: fmt.Sprintf("%s: unsupported format version %d", path, rec.Version)}
	}
	return rec.Header, nil
}

// corrupt reports an unreadable line. A *session.Error cause keeps its code.
func corrupt(path string, line int, err error) error {
	code, msg := session.CodeCorrupt, err.Error()
	if se := (*session.Error)(nil); errors.As(err, &se) {
		code, msg = se.Code, se.Msg
	}
	return &session.Error{Code: code, Msg: fmt.Sprintf("%s:%d: %s", path, line, msg)}
}

// List implements session.Backend: it reads line 1 of every session file.
// Unreadable files are skipped with a warning.
func (b *Backend) List() ([]session.Header, error) {
	projects, err := os.ReadDir(b.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	var hs []session.Header
	for _, p := range projects {
		if !p.IsDir() {
			continue
		}
		dir := filepath.Join(b.root, p.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			slog.Warn("jsonl: skipping unreadable project directory", "dir", p.Name(), "err", err)
			continue
		}
		for _, e := range entries {
			path, id, ok := entryPath(dir, e)
			if !ok {
				continue
			}
			h, err := readHeader(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err == nil && h.ID != id {
				err = fmt.Errorf("header id %q does not match the file's name", h.ID)
			}
			if err != nil {
				slog.Warn("jsonl: skipping unreadable session", "path", path, "err", err)
				continue
			}
			hs = append(hs, h)
		}
	}
	return hs, nil
}

// stat returns the first of paths that exists.
func stat(paths ...string) (string, bool) {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

func readHeader(path string) (session.Header, error) {
	f, err := openRegular(path, os.O_RDONLY)
	if err != nil {
		return session.Header{}, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n') // headers are short
	if len(line) == 0 && err == io.EOF {
		return session.Header{}, corrupt(path, 1, errors.New("no header record"))
	} else if err != nil && err != io.EOF {
		return session.Header{}, err
	}
	return parseHeader(line, path)
}

// openRegular opens a session file with flag, refusing anything but a
// regular file (CodeCorrupt): a FIFO would block its reader forever, a
// device never end. It opens without blocking, then checks what it opened.
// A missing file's error wraps fs.ErrNotExist.
func openRegular(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		err = fmt.Errorf("jsonl: %w", err)
	case !fi.Mode().IsRegular():
		err = &session.Error{Code: session.CodeCorrupt, Msg: fmt.Sprintf("%s is not a regular file (%s)", path, fi.Mode().Type())}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// persister appends one session's events to its file.
type persister struct {
	b      *Backend
	path   string
	header session.Header

	mu      sync.Mutex
	compact session.Compactor // big texts stored once
	f       *os.File          // nil until the first Append creates the file
	size    int64             // bytes of intact content
	next    int64             // seq the next event must carry
	buf     []byte
	closed  bool
	broken  error // sticky: a failed write could not be rolled back
}

// Append writes events as one write call, creating the file (header first)
// on first use. A failed write is rolled back, so the file keeps only whole
// lines and a later Append may succeed.
func (p *persister) Append(events []session.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return &session.Error{Code: session.CodeClosed, Msg: "jsonl: append to closed " + p.path}
	case p.broken != nil:
		return p.broken
	case len(events) == 0:
		return nil
	}
	saved := p.compact.Save()
	buf := p.buf[:0]
	if p.f == nil {
		b, err := json.Marshal(headerRecord{Type: recordType, Header: p.header})
		if err != nil {
			return fmt.Errorf("jsonl: %s: %w", p.path, err)
		}
		buf = append(append(buf, b...), '\n')
	}
	for i, e := range events {
		if want := p.next + int64(i); e.Seq != want {
			p.compact.Restore(saved)
			return fmt.Errorf("jsonl: %s: event has seq %d, want %d", p.path, e.Seq, want)
		}
		var err error
		if buf, err = p.compact.Compact(e).AppendJSON(buf); err != nil {
			p.compact.Restore(saved)
			return fmt.Errorf("jsonl: %s: %w", p.path, err)
		}
		buf = append(buf, '\n')
	}
	if cap(buf) <= 1<<20 {
		p.buf = buf[:0]
	}
	if p.f == nil {
		if err := p.publish(buf); err != nil {
			p.compact.Restore(saved)
			return err
		}
	} else if err := p.write(buf); err != nil {
		p.compact.Restore(saved)
		return p.rollback(err)
	}
	p.size += int64(len(buf))
	p.next += int64(len(events))
	return nil
}

// publish creates the session file holding b (the header and the first
// batch): it writes a temporary file under the writer's lock, then links it
// to its name, refusing to replace anything. Readers therefore never see a
// file without its header, nor one whose writer does not hold the lock yet.
// The project directory is made only when the file cannot be created
// without it.
func (p *persister) publish(b []byte) error {
	dir := filepath.Dir(p.path)
	tmp := filepath.Join(dir, fmt.Sprintf(".%016x.tmp", rand.Uint64())) // short: the id may fill NAME_MAX
	const flag = os.O_WRONLY | os.O_CREATE | os.O_EXCL | os.O_APPEND
	f, err := os.OpenFile(tmp, flag, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o700); err == nil {
			f, err = os.OpenFile(tmp, flag, 0o600)
		}
	}
	if err != nil {
		return fmt.Errorf("jsonl: %w", err)
	}
	p.f = f
	err = lockWriter(f)
	if err == nil {
		err = p.write(b)
	}
	if err == nil {
		err = os.Link(tmp, p.path)
		if errors.Is(err, fs.ErrExist) {
			err = &session.Error{Code: session.CodeExists, Msg: fmt.Sprintf("session %s is already stored at %s", p.header.ID, p.path)}
		}
	}
	os.Remove(tmp)
	if err != nil {
		f.Close()
		p.f = nil
		if se := (*session.Error)(nil); errors.As(err, &se) {
			return err
		}
		return fmt.Errorf("jsonl: create %s: %w", p.path, err)
	}
	return nil
}

func (p *persister) write(b []byte) error {
	write := p.b.write
	if write == nil {
		write = (*os.File).Write
	}
	n, err := write(p.f, b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// rollback undoes a failed write: the file is cut back to its intact size.
func (p *persister) rollback(err error) error {
	err = fmt.Errorf("jsonl: write %s: %w", p.path, err)
	if undo := p.f.Truncate(p.size); undo != nil {
		p.broken = fmt.Errorf("%w; rollback failed, file left unusable: %w", err, undo)
		return p.broken
	}
	return err
}

// Close closes the file. It is idempotent.
func (p *persister) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.f == nil { // never written: give the id back
		p.b.mu.Lock()
		if p.b.known[p.header.ID] == p.path {
			delete(p.b.known, p.header.ID)
		}
		p.b.mu.Unlock()
		return nil
	}
	return p.f.Close()
}
