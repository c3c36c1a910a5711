package trust

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// RecordFile is the name of the record in $DSH_HOME.
const RecordFile = "trust.json"

// maxRecord bounds the record file.
const maxRecord = 16 << 20

// State is what the record says of a folder.
type State int

// The states of a folder.
const (
	// Nothing: the folder has no project items.
	Nothing State = iota
	// Untrusted: the folder has project items and was never trusted.
	Untrusted
	// Changed: the folder was trusted, and its items changed since.
	Changed
	// Trusted: the folder's items are those the user trusted.
	Trusted
)

func (s State) String() string {
	switch s {
	case Nothing:
		return "nothing to trust"
	case Untrusted:
		return "not trusted"
	case Changed:
		return "changed since trusted"
	case Trusted:
		return "trusted"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Status is a folder's items and its state.
type Status struct {
	Inventory
	State State
}

// Entry is one trusted folder of the record.
type Entry struct {
	Dir     string    `json:"-"`
	SHA256  string    `json:"sha256"`
	Trusted time.Time `json:"trusted"`
}

// record is the content of trust.json.
type record struct {
	Folders map[string]Entry `json:"folders"`
}

// Error is a record dsh cannot use: Path names the file.
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string { return "trust record " + e.Path + ": " + e.Msg }

// ErrorCode returns the stable code of record errors.
func (e *Error) ErrorCode() string { return "TRUST_RECORD" }

// Store is the record of trusted folders in one dsh home.
type Store struct {
	path string
	user []string // the user's own folders of items (see Scan)
}

// Open returns the record of the dsh home home ($DSH_HOME); nothing is
// read until it is used. user are the user's own folders of definitions,
// which are never project items (see Scan).
func Open(home string, user ...string) *Store {
	return &Store{path: filepath.Join(home, RecordFile), user: user}
}

// Path returns the record's file.
func (s *Store) Path() string { return s.path }

// Scan returns dir's items, without the user's folders (see Scan).
func (s *Store) Scan(dir string) (Inventory, error) { return Scan(dir, s.user...) }

// Check returns dir's items and state. The record is read only when dir
// has items.
func (s *Store) Check(dir string) (Status, error) {
	inv, err := Scan(dir, s.user...)
	if err != nil {
		return Status{}, err
	}
	st := Status{Inventory: inv}
	if len(inv.Items) == 0 {
		return st, nil
	}
	rec, err := s.read()
	if err != nil {
		return st, err
	}
	e, ok := rec.Folders[inv.Dir]
	switch {
	case !ok:
		st.State = Untrusted
	case e.SHA256 != inv.Hash():
		st.State = Changed
	default:
		st.State = Trusted
	}
	return st, nil
}

// Trust records dir's current items as trusted and returns its status.
func (s *Store) Trust(dir string) (Status, error) {
	inv, err := Scan(dir, s.user...)
	if err != nil {
		return Status{}, err
	}
	unlock, err := s.lock()
	if err != nil {
		return Status{}, err
	}
	defer unlock()
	rec, err := s.read()
	if err != nil {
		return Status{}, err
	}
	rec.Folders[inv.Dir] = Entry{SHA256: inv.Hash(), Trusted: time.Now().UTC().Truncate(time.Second)}
	if err := s.write(rec); err != nil {
		return Status{}, err
	}
	return Status{Inventory: inv, State: Trusted}, nil
}

// Revoke forgets dir; it reports whether dir was in the record. A folder
// that no longer exists is forgotten by the path it was trusted at.
func (s *Store) Revoke(dir string) (bool, error) {
	key, err := Resolve(dir)
	if err != nil {
		if key, err = filepath.Abs(dir); err != nil {
			return false, err
		}
	}
	unlock, err := s.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	rec, err := s.read()
	if err != nil {
		return false, err
	}
	if _, ok := rec.Folders[key]; !ok {
		return false, nil
	}
	delete(rec.Folders, key)
	return true, s.write(rec)
}

// List returns the trusted folders, sorted by path.
func (s *Store) List() ([]Entry, error) {
	rec, err := s.read()
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, dir := range slices.Sorted(maps.Keys(rec.Folders)) {
		e := rec.Folders[dir]
		e.Dir = dir
		out = append(out, e)
	}
	return out, nil
}

// lock serializes the changes of the record across processes.
func (s *Store) lock() (func(), error) {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return nil, &Error{Path: s.path, Msg: err.Error()}
	}
	unlock, err := lock(s.path + ".lock")
	if err != nil {
		return nil, &Error{Path: s.path, Msg: err.Error()}
	}
	return unlock, nil
}

// read loads the record; a missing one is empty.
func (s *Store) read() (record, error) {
	rec := record{Folders: map[string]Entry{}}
	fi, err := os.Lstat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return rec, &Error{Path: s.path, Msg: err.Error()}
	}
	if !fi.Mode().IsRegular() {
		return rec, &Error{Path: s.path, Msg: "not a regular file; remove it"}
	}
	data, err := ReadFile(s.path, maxRecord)
	if err != nil {
		return rec, &Error{Path: s.path, Msg: err.Error()}
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, &Error{Path: s.path, Msg: fmt.Sprintf("corrupt (%v); fix or remove it, then trust the folders again", err)}
	}
	if rec.Folders == nil {
		rec.Folders = map[string]Entry{}
	}
	return rec, nil
}

// write replaces the record atomically, mode 0600.
func (s *Store) write(rec record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &Error{Path: s.path, Msg: err.Error()}
	}
	f, err := os.CreateTemp(dir, RecordFile+".*")
	if err != nil {
		return &Error{Path: s.path, Msg: err.Error()}
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	err = errors.Join(err, f.Chmod(0o600), f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err != nil {
		os.Remove(tmp)
		return &Error{Path: s.path, Msg: err.Error()}
	}
	return nil
}
