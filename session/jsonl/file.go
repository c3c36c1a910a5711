package jsonl

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/session"
)

// file is a session file open for writing in this process: one handle and
// one writer lock, shared by every persister whose session is in it, and
// closed with the last of them. Each batch is one write under mu.
type file struct {
	f    *os.File
	name string      // the name it was created or opened by
	info os.FileInfo // b.mu; nil until a Load looks for the file
	refs int         // b.mu

	mu     sync.Mutex
	size   int64 // bytes of intact content
	tail   tailFix
	broken error // sticky: a failed write could not be rolled back
}

// tailFix is what a loaded file's end needs before the next write.
type tailFix int

const (
	tailOK        tailFix = iota
	tailTorn              // cut the torn last line (to size)
	tailNoNewline         // end the last line
)

// fixTail repairs the file's end as its loader found it. f.mu must be held.
func (f *file) fixTail() error {
	switch f.tail {
	case tailTorn:
		if err := f.f.Truncate(f.size); err != nil {
			return fmt.Errorf("jsonl: drop torn last line of %s: %w", f.name, err)
		}
	case tailNoNewline:
		if _, err := f.f.Write([]byte{'\n'}); err != nil {
			return fmt.Errorf("jsonl: end last line of %s: %w", f.name, err)
		}
		f.size++
	}
	f.tail = tailOK
	return nil
}

// append writes buf, whole lines of session path, as one write; then, when
// it is not nil, link, the step that publishes a session. A failed write or
// link is rolled back, so the file keeps only whole lines.
func (f *file) append(b *Backend, path string, buf []byte, link func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken != nil {
		return f.broken
	}
	if err := f.fixTail(); err != nil {
		return err
	}
	err := b.writeTo(f.f, buf)
	if err != nil {
		err = fmt.Errorf("jsonl: write %s: %w", path, err)
	} else if link != nil {
		err = link()
	}
	if err != nil {
		if undo := f.f.Truncate(f.size); undo != nil {
			f.broken = fmt.Errorf("%w; rollback failed, file left unusable: %w", err, undo)
			return f.broken
		}
		return err
	}
	f.size += int64(len(buf))
	return nil
}

// readAll returns the file's intact content. f.mu must be held.
func (f *file) readAll() ([]byte, error) {
	data, err := io.ReadAll(io.NewSectionReader(f.f, 0, f.size))
	if err != nil {
		return nil, fmt.Errorf("jsonl: %w", err)
	}
	return data, nil
}

// linkFile gives the file at oldname the name newname.
func (b *Backend) linkFile(oldname, newname string) error {
	if b.link != nil {
		return b.link(oldname, newname)
	}
	return os.Link(oldname, newname)
}

func (b *Backend) writeTo(f *os.File, buf []byte) error {
	write := b.write
	if write == nil {
		write = (*os.File).Write
	}
	n, err := write(f, buf)
	if err == nil && n < len(buf) {
		err = io.ErrShortWrite
	}
	return err
}

// addWriter records p as its session's writer in this process. b.mu must
// be held.
func (b *Backend) addWriter(p *persister) {
	b.writers[p.header.ID] = p
}

// openFile returns the file open for writing in this process that info
// describes, with a reference taken, or nil. b.mu must be held.
func (b *Backend) openFile(info os.FileInfo) *file {
	for f := range b.files {
		if f.info == nil {
			if f.info, _ = f.f.Stat(); f.info == nil {
				continue
			}
		}
		if os.SameFile(f.info, info) {
			f.refs++
			return f
		}
	}
	return nil
}

// addFile registers a file just opened or created, with one reference.
// b.mu must be held.
func (b *Backend) addFile(f *file) {
	f.refs = 1
	b.files[f] = struct{}{}
}

// release drops a reference to f, closing it with the last. b.mu must be
// held.
func (b *Backend) release(f *file) error {
	if f.refs--; f.refs > 0 {
		return nil
	}
	delete(b.files, f)
	if err := f.f.Close(); err != nil {
		return fmt.Errorf("jsonl: %w", err)
	}
	return nil
}

// host returns, with a reference taken, the file a new session p is
// written into: its parent's, when its parent is written through this
// backend, its file exists, and it is in p's project directory. It returns
// nil otherwise: p gets a file of its own.
func (b *Backend) host(p *persister) *file {
	if p.header.ParentSession == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	parent := b.writers[p.header.ParentSession]
	if parent == nil || parent.file == nil || !sameDir(parent.file.name, p.path) {
		return nil
	}
	parent.file.refs++
	return parent.file
}

// lineBuf holds the storage lines are encoded into, lent by the Backend
// to one Append at a time, so that a session (a child's is short-lived)
// holds none between Appends.
type lineBuf struct{ b []byte }

// maxLineBuf bounds the storage a lineBuf keeps: a batch bigger than this
// (a huge tool result) is not kept for the next.
const maxLineBuf = 1 << 20

// lineBuf returns a lineBuf to encode into; Put it back into b.lines.
func (b *Backend) lineBuf() *lineBuf {
	if lb, ok := b.lines.Get().(*lineBuf); ok {
		return lb
	}
	return &lineBuf{b: make([]byte, 0, 4<<10)}
}

// sameDir reports whether the clean paths a and b name entries of one
// directory, as filepath.Dir would say, without allocating when both are
// below a directory.
func sameDir(a, b string) bool {
	i, j := strings.LastIndexAny(a, sepChars), strings.LastIndexAny(b, sepChars)
	if i <= 0 || j <= 0 {
		return filepath.Dir(a) == filepath.Dir(b)
	}
	return a[:i] == b[:j]
}

// sepChars are the bytes that separate a path's elements.
const sepChars = "/" + string(filepath.Separator)

// persister appends one session's events to its file.
type persister struct {
	b      *Backend
	path   string // the session's name
	header session.Header

	mu      sync.Mutex
	compact session.Compactor // big texts stored once
	file    *file             // nil until the first Append; set under mu and b.mu
	tag     []byte            // a session in another's file: tagOf(its id)
	next    int64             // seq the next event must carry
	closed  bool
}

// Append writes events as one write call, creating the session (header
// first) on first use. A failed write is rolled back, so the file keeps
// only whole lines and a later Append may succeed.
func (p *persister) Append(events []session.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return &session.Error{Code: session.CodeClosed, Msg: "jsonl: append to closed " + p.path}
	case len(events) == 0:
		return nil
	}
	saved := p.compact.Save()
	lb := p.b.lineBuf()
	defer p.b.lines.Put(lb)
	var err error
	if p.file == nil {
		err = p.publish(lb, events)
	} else {
		var buf []byte
		if buf, err = p.encode(lb, events, false); err == nil {
			err = p.file.append(p.b, p.path, buf, nil)
		}
	}
	if err != nil {
		p.compact.Restore(saved)
		return err
	}
	p.next += int64(len(events))
	return nil
}

// encode returns events as lines, after the header record when header is
// set, each tagged when the session is in another's file, in lb's storage
// (valid until lb is reused).
func (p *persister) encode(lb *lineBuf, events []session.Event, header bool) ([]byte, error) {
	buf := lb.b[:0]
	if header {
		start := len(buf)
		if p.tag != nil {
			buf = append(buf, p.tag...)
			start = len(buf)
		}
		buf = appendHeader(buf, &p.header)
		if p.tag != nil {
			buf[start] = ','
		}
		buf = append(buf, '\n')
	}
	for i, e := range events {
		if want := p.next + int64(i); e.Seq != want {
			return nil, fmt.Errorf("jsonl: %s: event has seq %d, want %d", p.path, e.Seq, want)
		}
		start := len(buf)
		if p.tag != nil {
			buf = append(buf, p.tag...) // then the event's '{' becomes the tag's ','
			start = len(buf)
		}
		var err error
		if buf, err = p.compact.Compact(e).AppendJSON(buf); err != nil {
			return nil, fmt.Errorf("jsonl: %s: %w", p.path, err)
		}
		if p.tag != nil {
			buf[start] = ','
		}
		buf = append(buf, '\n')
	}
	if cap(buf) <= maxLineBuf {
		lb.b = buf[:0]
	}
	return buf, nil
}

// publish writes the session's header and first batch: into its parent's
// file, then linking its name to that file, when the parent is written
// here (host); else, or when the link cannot be made (the parent's name is
// gone, the file has as many links as the file system allows, the file
// system has no hard links), as a file of its own.
func (p *persister) publish(lb *lineBuf, events []session.Event) error {
	if f := p.b.host(p); f != nil {
		saved := p.compact.Save()
		p.tag = tagOf(p.header.ID)
		buf, err := p.encode(lb, events, true)
		if err == nil {
			err = f.append(p.b, p.path, buf, func() error { return p.b.linkFile(f.name, p.path) })
		}
		if err == nil {
			p.b.mu.Lock()
			p.file = f
			p.b.mu.Unlock()
			return nil
		}
		p.b.mu.Lock()
		p.b.release(f)
		p.b.mu.Unlock()
		p.tag = nil
		if linkErr := (*os.LinkError)(nil); !errors.As(err, &linkErr) || errors.Is(err, fs.ErrExist) {
			return p.linkError(err)
		}
		slog.Info("jsonl: a child session gets a file of its own", "session", p.header.ID, "err", err)
		p.compact.Restore(saved)
	}
	buf, err := p.encode(lb, events, true)
	if err != nil {
		return err
	}
	return p.create(buf)
}

// linkError reports a failed publication: a name already taken is
// CodeExists.
func (p *persister) linkError(err error) error {
	if se := (*session.Error)(nil); errors.As(err, &se) {
		return err
	}
	if errors.Is(err, fs.ErrExist) {
		return &session.Error{Code: session.CodeExists, Msg: fmt.Sprintf("session %s is already stored at %s", p.header.ID, p.path)}
	}
	return fmt.Errorf("jsonl: create %s: %w", p.path, err)
}

// create makes the session's own file holding b (the header and the first
// batch): it writes a temporary file under the writer's lock, then links it
// to its name, refusing to replace anything. Readers therefore never see a
// file without its header, nor one whose writer does not hold the lock yet.
// The project directory is made only when the file cannot be created
// without it.
func (p *persister) create(b []byte) error {
	dir := filepath.Dir(p.path)
	tmp := filepath.Join(dir, fmt.Sprintf(".%016x.tmp", rand.Uint64())) // short: the id may fill NAME_MAX
	// Read-write: a session in the file may be loaded while it is open.
	const flag = os.O_RDWR | os.O_CREATE | os.O_EXCL | os.O_APPEND
	fd, err := os.OpenFile(tmp, flag, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o700); err == nil {
			fd, err = os.OpenFile(tmp, flag, 0o600)
		}
	}
	if err != nil {
		return fmt.Errorf("jsonl: %w", err)
	}
	err = lockWriter(fd)
	if err == nil {
		err = p.b.writeTo(fd, b)
	}
	if err == nil {
		err = p.b.linkFile(tmp, p.path)
	}
	os.Remove(tmp)
	if err != nil {
		fd.Close()
		return p.linkError(err)
	}
	f := &file{f: fd, name: p.path, size: int64(len(b))}
	p.b.mu.Lock()
	p.b.addFile(f)
	p.file = f
	p.b.mu.Unlock()
	return nil
}

// Close releases the session's file, closed with its last session. It is
// idempotent.
func (p *persister) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if p.b.writers[p.header.ID] == p {
		delete(p.b.writers, p.header.ID)
	}
	if p.file == nil { // never written: give the id back
		if p.b.known[p.header.ID] == p.path {
			delete(p.b.known, p.header.ID)
		}
		return nil
	}
	return p.b.release(p.file)
}
