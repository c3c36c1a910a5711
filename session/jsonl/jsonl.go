// Package jsonl stores sessions as JSON Lines files at
// <root>/<project-key>/<encoded-id>.jsonl: the header record on line 1, then
// one event per line. Every session of a working directory is named in one
// project directory, made once, so a new session makes no directory.
//
// A child session (its header names a parent session that this backend is
// writing, in the same project directory) costs no file either: its lines
// are appended to the file its parent's lines are in, each tagged with the
// child's id as the object's first key ({"sid":"<id>","type":…}), its
// header record first; and its name, <encoded-child-id>.jsonl, is a hard
// link to that file, so any session is found by its name. Untagged lines
// are the session of line 1. Reading a name whose line 1 is another
// session's takes that name's tagged header record (the last, should a crash
// have left an earlier one) and its tagged lines after it. A child whose
// parent is written elsewhere (another process, another project directory)
// gets a file of its own.
//
// Sessions written by earlier builds, at <root>/<project-key>/<encoded-id>/
// session.jsonl, are found, listed, read and resumed in place. A new file
// appears whole at its session's first Append (written under a temporary
// name, then linked into place), a child's name once its first lines are
// written, and files are only ever appended to. Writes are not fsynced: a
// log survives a process crash intact, and the torn last line a system crash
// can leave is dropped on load.
//
// One process writes a file through one handle, shared by every session in
// it, and holds an exclusive flock(2) on it for as long as any of them
// writes; the kernel releases it however the process ends. While another
// process writes any session of a file, loading one of its sessions for
// writing is refused (busy), and readers there see every session of the
// file as live (in the writing process, only the sessions it writes).
// Readers (Read) open files read-only and change nothing: the lock tells
// them a running session from a crashed one. Only a writer that takes the
// lock (Load) repairs a file, whichever session its torn last line was.
package jsonl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/session"
)

// Backend is a session.Backend over a directory tree. It is safe for
// concurrent use; each persister it returns serves one session.
type Backend struct {
	root  string
	write func(f *os.File, b []byte) (int, error) // test hook; nil means f.Write
	link  func(oldname, newname string) error     // test hook; nil means os.Link

	mu      sync.Mutex
	known   map[string]string     // session id → name, built by one scan on first use
	writers map[string]*persister // sessions with an open persister
	files   map[*file]struct{}    // files open for writing, one handle each
	dirs    map[string]string     // cwd → its project directory, as Path makes it

	lines sync.Pool // *lineBuf
}

var _ session.Backend = (*Backend)(nil)

// New returns a backend storing sessions under root, typically
// DefaultRoot's result. The directory is created when first needed.
func New(root string) *Backend {
	return &Backend{root: root, writers: map[string]*persister{}, files: map[*file]struct{}{}, dirs: map[string]string{}}
}

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

// pathLocked is Path, with the project directory of h.Cwd computed once.
// b.mu must be held.
func (b *Backend) pathLocked(h session.Header) string {
	dir, ok := b.dirs[h.Cwd]
	if !ok {
		if len(b.dirs) >= maxDirs {
			clear(b.dirs)
		}
		dir = filepath.Join(b.root, ProjectKey(h.Cwd))
		b.dirs[h.Cwd] = dir
	}
	return dir + string(filepath.Separator) + EncodeID(h.ID) + Ext
}

// maxDirs bounds the project directories a Backend remembers.
const maxDirs = 64

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

// Create implements session.Backend. It refuses an id stored anywhere
// under the root when the backend first scanned it, or created through it
// since; it makes no system call. The file appears at the first Append,
// whose link refuses a name taken meanwhile by another process (CodeExists).
func (b *Backend) Create(h session.Header) (session.Persister, error) {
	if h.ID == "" {
		return nil, &session.Error{Code: session.CodeInvalidHeader, Msg: "jsonl: header has no id"}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	path := b.pathLocked(h)
	if err := b.index(); err != nil {
		return nil, err
	}
	if stored, ok := b.known[h.ID]; ok {
		return nil, &session.Error{Code: session.CodeExists, Msg: fmt.Sprintf("session %s is already stored at %s", h.ID, stored)}
	}
	b.known[h.ID] = path // reserved: a second Create of the id is refused
	p := &persister{b: b, path: path, header: h}
	b.addWriter(p)
	return p, nil
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
