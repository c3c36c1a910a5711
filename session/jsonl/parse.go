package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"

	"github.com/dsh-go/dsh/session"
)

// headerRecord is a session's first line: line 1 of its file, or its first
// tagged line in the file of its parent.
type headerRecord struct {
	Type string `json:"type"` // always recordType
	session.Header
}

const recordType = "session"

// sidKey starts every tagged line: {"sid":"<id>",…}.
const sidKey = `{"sid":`

// tagOf returns what starts each line of session id in another session's
// file, but for the comma that follows: {"sid":"<id>".
func tagOf(id string) []byte {
	return session.AppendString(append(make([]byte, 0, len(sidKey)+len(id)+8), sidKey...), id)
}

// appendHeader appends h's header record, {"type":"session",…}, as
// encoding/json writes a headerRecord (TestHeaderRecordMatchesJSON).
func appendHeader(buf []byte, h *session.Header) []byte {
	buf = append(buf, `{"type":"session","version":`...)
	buf = strconv.AppendInt(buf, int64(h.Version), 10)
	buf = append(buf, `,"id":`...)
	buf = session.AppendString(buf, h.ID)
	buf = append(buf, `,"createdAt":`...)
	buf = strconv.AppendInt(buf, h.CreatedAt, 10)
	if h.Cwd != "" {
		buf = session.AppendString(append(buf, `,"cwd":`...), h.Cwd)
	}
	if h.ParentSession != "" {
		buf = session.AppendString(append(buf, `,"parentSession":`...), h.ParentSession)
	}
	if h.SeedLength != 0 {
		buf = strconv.AppendInt(append(buf, `,"seedLength":`...), int64(h.SeedLength), 10)
	}
	if h.Origin != "" {
		buf = session.AppendString(append(buf, `,"origin":`...), h.Origin)
	}
	buf = append(buf, `,"delegationDepth":`...)
	buf = strconv.AppendInt(buf, int64(h.DelegationDepth), 10)
	return append(buf, '}')
}

// keptLines cuts the content of a session file into lines, each with its
// '\n' except perhaps the last, and returns the size of what it keeps. The
// last line is left out when it is not valid JSON (torn by a crash), or
// when it has no newline yet and live says a writer may still be writing
// it. Line 1 is always kept.
func keptLines(data []byte, live bool) ([][]byte, int64) {
	lines := make([][]byte, 0, bytes.Count(data, []byte{'\n'})+1)
	for rest := data; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			lines = append(lines, rest)
			break
		}
		lines = append(lines, rest[:i+1])
		rest = rest[i+1:]
	}
	size := int64(len(data))
	if n := len(lines); n > 1 {
		last := lines[n-1]
		if (live && last[len(last)-1] != '\n') || !json.Valid(last) {
			size -= int64(len(last))
			lines = lines[:n-1]
		}
	}
	return lines, size
}

// parseLog decodes session id from the kept lines of the file at path: the
// file's own session (line 1's), or a session inside it (hosted), whose
// lines carry its tag. Large logs are decoded on every core.
func parseLog(lines [][]byte, path, id string) (h session.Header, events []session.Event, hosted bool, err error) {
	if len(lines) == 0 {
		return h, nil, false, corrupt(path, 1, errors.New("no header record"))
	}
	if h, err = parseHeader(lines[0], path, 1); err != nil {
		return h, nil, false, err
	}
	var own [][]byte // the session's event lines
	var nums []int   // their line numbers in the file
	if h.ID == id {
		own, nums = make([][]byte, 0, len(lines)-1), make([]int, 0, len(lines)-1)
		for i, line := range lines[1:] {
			if !bytes.HasPrefix(line, []byte(sidKey)) {
				own, nums = append(own, line), append(nums, i+2)
			}
		}
	} else {
		owner := h.ID
		tag := append(tagOf(id), ',')
		found := false
		for i, line := range lines[1:] {
			if !bytes.HasPrefix(line, tag) {
				continue
			}
			if bytes.HasPrefix(line[len(tag):], []byte(`"type":"session",`)) {
				if h, err = parseHeader(line, path, i+2); err != nil {
					return h, nil, false, err
				}
				if h.ID != id {
					return h, nil, false, corrupt(path, i+2, fmt.Errorf("header id %q in a line tagged %q", h.ID, id))
				}
				found, own, nums = true, own[:0], nums[:0] // a header again: what came before was a crashed attempt
				continue
			}
			if found {
				own, nums = append(own, line), append(nums, i+2)
			}
		}
		if !found {
			return session.Header{}, nil, false, corrupt(path, 1, fmt.Errorf("header id %q, want %q, and no header record of %q inside the file", owner, id, id))
		}
		hosted = true
	}
	events = make([]session.Event, len(own))
	errs := decodeAll(own, events)
	for i := range own {
		if errs[i] != nil {
			return h, nil, false, corrupt(path, nums[i], errs[i])
		}
		if events[i].Seq != int64(i) {
			return h, nil, false, corrupt(path, nums[i], fmt.Errorf("event has seq %d, want %d", events[i].Seq, i))
		}
	}
	if err := session.Expand(events); err != nil {
		return h, nil, false, &session.Error{Code: session.CodeCorrupt, Msg: fmt.Sprintf("%s: %v", path, err)}
	}
	if _, err := session.Repair(events); err != nil {
		return h, nil, false, &session.Error{Code: session.CodeCorrupt, Msg: fmt.Sprintf("%s: %v", path, err)}
	}
	return h, events, hosted, nil
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

// parseHeader decodes a header record, line n of the file at path.
func parseHeader(line []byte, path string, n int) (session.Header, error) {
	var rec headerRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		return session.Header{}, corrupt(path, n, err)
	}
	if rec.Type != recordType {
		return session.Header{}, corrupt(path, n, fmt.Errorf("record type %q, want %q", rec.Type, recordType))
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
