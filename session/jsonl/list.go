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
	"os"
	"path/filepath"

	"github.com/dsh-go/dsh/session"
)

// List implements session.Backend: it reads line 1 of every session file,
// once per file however many names it has (a file's sessions inside it are
// listed from one pass over it). Unreadable files are skipped with a
// warning.
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
		for _, g := range groupByFile(dir, entries) {
			hs = append(hs, listFile(g)...)
		}
	}
	return hs, nil
}

// name is a session's name in a project directory: the file it stands for
// and the id it encodes.
type name struct{ path, id string }

// groupByFile groups the session names among a project directory's
// entries by the file they name, in the entries' order. A name that is no
// regular file is a group of its own.
func groupByFile(dir string, entries []fs.DirEntry) [][]name {
	var groups [][]name
	var infos []os.FileInfo // of each group, for os.SameFile where fileKey fails
	byKey := map[[2]uint64]int{}
	for _, e := range entries {
		path, id, ok := entryPath(dir, e)
		if !ok {
			continue
		}
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // an empty directory of the earlier layout
		}
		n := name{path, id}
		if err != nil || !fi.Mode().IsRegular() {
			groups, infos = append(groups, []name{n}), append(infos, nil)
			continue
		}
		i := -1
		if key, ok := fileKey(fi); ok {
			if j, seen := byKey[key]; seen {
				i = j
			} else {
				byKey[key] = len(groups)
			}
		} else {
			for j, other := range infos {
				if other != nil && os.SameFile(fi, other) {
					i = j
					break
				}
			}
		}
		if i < 0 {
			groups, infos = append(groups, []name{n}), append(infos, fi)
		} else {
			groups[i] = append(groups[i], n)
		}
	}
	return groups
}

// listFile returns the headers of the sessions the names of one file
// stand for: line 1's, and those of the sessions inside it, found in one
// pass.
func listFile(names []name) []session.Header {
	h, err := readHeader(names[0].path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		slog.Warn("jsonl: skipping unreadable session", "path", names[0].path, "err", err)
		return nil
	}
	var hs []session.Header
	var inside []name
	for _, n := range names {
		if n.id == h.ID {
			hs = append(hs, h)
		} else {
			inside = append(inside, n)
		}
	}
	if len(inside) == 0 {
		return hs
	}
	found, err := headersInside(names[0].path, inside)
	if err != nil {
		slog.Warn("jsonl: skipping unreadable session file", "path", names[0].path, "err", err)
		return hs
	}
	for _, n := range inside {
		if fh, ok := found[n.id]; ok {
			hs = append(hs, fh)
		} else {
			slog.Warn("jsonl: skipping unreadable session", "path", n.path,
				"err", fmt.Errorf("header id %q, and no header record of %q inside the file", h.ID, n.id))
		}
	}
	return hs
}

// headersInside reads the file at path once and returns the header
// records of the named sessions tagged inside it (each one's last). Lines
// are read a buffer at a time: a long line costs no memory.
func headersInside(path string, names []name) (map[string]session.Header, error) {
	f, _, err := openRegular(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n.id] = true
	}
	found := map[string]session.Header{}
	r := bufio.NewReaderSize(f, 64<<10)
	for n, start := 1, true; ; {
		line, err := r.ReadSlice('\n')
		if start && n > 1 {
			if sid, ok := headerTag(line); ok && want[sid] {
				if h, err := parseHeader(line, path, n); err == nil && h.ID == sid {
					found[sid] = h
				}
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			start = false // the rest of a long line
			continue
		case err == io.EOF:
			return found, nil
		case err != nil:
			return found, fmt.Errorf("jsonl: %w", err)
		}
		n, start = n+1, true
	}
}

// headerTag returns the id a tagged header record carries; ok is false for
// any other line.
func headerTag(line []byte) (sid string, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(sidKey))
	if !found || len(rest) == 0 || rest[0] != '"' {
		return "", false
	}
	end := 1
	for end < len(rest) && rest[end] != '"' {
		if rest[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(rest) || !bytes.HasPrefix(rest[end+1:], []byte(`,"type":"session",`)) {
		return "", false
	}
	if json.Unmarshal(rest[:end+1], &sid) != nil {
		return "", false
	}
	return sid, true
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

// readHeader reads line 1 of the file at path.
func readHeader(path string) (session.Header, error) {
	f, _, err := openRegular(path, os.O_RDONLY)
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
	return parseHeader(line, path, 1)
}
