package jsonl

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/dsh-go/dsh/session"
)

// Load implements session.Backend for a writer. It takes the writer lock of
// the session's file, held until the last persister of a session in it is
// closed (a file open in this process is shared, not locked twice), and
// refuses a session another live writer holds (CodeBusy): one of this
// process, or another process writing any session of the file. A torn
// last line, whichever session's, is dropped and cut from the file; any
// other unreadable line of the session, an unsupported version, an unknown
// required event type or a structurally broken log is refused with an error
// naming the file (and line). The persister appends after the kept content.
func (b *Backend) Load(id string) (session.Header, []session.Event, session.Persister, error) {
	path, err := b.find(id)
	if err != nil {
		return session.Header{}, nil, nil, err
	}
	fd, info, err := openRegular(path, os.O_RDWR|os.O_APPEND)
	if err != nil {
		return session.Header{}, nil, nil, err
	}
	b.mu.Lock()
	if b.writers[id] != nil {
		b.mu.Unlock()
		fd.Close()
		return session.Header{}, nil, nil, &session.Error{Code: session.CodeBusy, Msg: fmt.Sprintf("session %s is being written in this process", id)}
	}
	f := b.openFile(info)
	fresh := f == nil
	if fresh {
		if err := lockWriter(fd); err != nil {
			b.mu.Unlock()
			fd.Close()
			if errors.Is(err, errLocked) {
				return session.Header{}, nil, nil, &session.Error{Code: session.CodeBusy,
					Msg: fmt.Sprintf("%s is being written by a live process (it holds every session of its file)", path)}
			}
			return session.Header{}, nil, nil, fmt.Errorf("jsonl: lock %s: %w", path, err)
		}
		f = &file{f: fd, name: path, info: info}
		f.mu.Lock() // its content is read before anyone writes to it
		b.addFile(f)
	} else {
		fd.Close()
	}
	p := &persister{b: b, path: path, header: session.Header{ID: id}, file: f}
	b.addWriter(p)
	b.mu.Unlock()

	if !fresh {
		f.mu.Lock()
	}
	h, events, hosted, err := f.load(path, id, fresh)
	f.mu.Unlock()
	if err != nil {
		p.Close()
		return session.Header{}, nil, nil, err
	}
	p.mu.Lock()
	p.header, p.next = h, int64(len(events))
	if hosted {
		p.tag = tagOf(id)
	}
	p.mu.Unlock()
	return h, events, p, nil
}

// load reads session id from the file, opened by name path. A file just
// opened (fresh) is read whole and its end repaired once the session
// loads; a file already open in this process is read up to what its
// writers wrote. f.mu must be held.
func (f *file) load(path, id string, fresh bool) (h session.Header, events []session.Event, hosted bool, err error) {
	var data []byte
	if fresh {
		if data, err = io.ReadAll(f.f); err != nil {
			return h, nil, false, fmt.Errorf("jsonl: %w", err)
		}
	} else if data, err = f.readAll(); err != nil {
		return h, nil, false, err
	}
	lines, size := keptLines(data, false)
	if fresh {
		f.size = size
		switch {
		case size < int64(len(data)):
			f.tail = tailTorn
		case len(data) > 0 && data[len(data)-1] != '\n':
			f.tail = tailNoNewline
		}
	}
	if h, events, hosted, err = parseLog(lines, path, id); err != nil {
		return h, nil, false, err
	}
	return h, events, hosted, f.fixTail()
}

// Read implements session.Reader: it opens the file read-only and never
// writes to it. live reports whether a writer holds the session: one of
// this process, or another process writing any session of its file. A file
// this process writes is read up to what its writers wrote.
func (b *Backend) Read(id string) (h session.Header, events []session.Event, live bool, err error) {
	path, err := b.find(id)
	if err != nil {
		return h, nil, false, err
	}
	fd, info, err := openRegular(path, os.O_RDONLY)
	if err != nil {
		return h, nil, false, err
	}
	defer fd.Close()
	b.mu.Lock()
	f := b.openFile(info)
	live = b.writers[id] != nil
	b.mu.Unlock()
	var data []byte
	if f != nil { // our own lock: only our writers are live
		f.mu.Lock()
		data, err = f.readAll()
		f.mu.Unlock()
		b.mu.Lock()
		b.release(f)
		b.mu.Unlock()
	} else {
		if live, err = writerAlive(fd); err != nil {
			return h, nil, false, fmt.Errorf("jsonl: lock %s: %w", path, err)
		}
		if data, err = io.ReadAll(fd); err != nil {
			err = fmt.Errorf("jsonl: %w", err)
		}
	}
	if err != nil {
		return h, nil, false, err
	}
	lines, _ := keptLines(data, live)
	h, events, _, err = parseLog(lines, path, id)
	return h, events, live, err
}

// openRegular opens a session file with flag, refusing anything but a
// regular file (CodeCorrupt): a FIFO would block its reader forever, a
// device never end. It opens without blocking, then checks what it opened.
// A missing file's error wraps fs.ErrNotExist.
func openRegular(path string, flag int) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("jsonl: %w", err)
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
		return nil, nil, err
	}
	return f, fi, nil
}
