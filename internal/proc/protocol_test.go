package proc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeRequest(t *testing.T) {
	good := `{"path":"/bin/sh","argv":["sh","-c","true"],"dir":"/","env":["A=b"],"sandbox":{"mode":"workspace-write","writable":["/tmp"],"unreadable":["/h/.ssh"],"network":"deny"}}`
	if _, err := decodeRequest([]byte(good)); err != nil {
		t.Fatalf("good request: %v", err)
	}
	for _, bad := range []string{
		``, `null`, `[]`, `{"path":"sh","argv":["sh"],"dir":"/"}`,
		`{"path":"/bin/sh","argv":[],"dir":"/"}`,
		`{"path":"/bin/sh","argv":["sh"],"dir":"rel"}`,
		`{"path":"/bin/sh","argv":["sh"],"dir":"/","env":["NOEQUALS"]}`,
		`{"path":"/bin/sh","argv":["sh"],"dir":"/","env":["=x"]}`,
		`{"path":"/bin/sh","argv":["s\u0000h"],"dir":"/"}`,
		`{"path":"/bin/sh","argv":["sh"],"dir":"/","sandbox":{"mode":"wide-open"}}`,
		`{"path":"/bin/sh","argv":["sh"],"dir":"/","sandbox":{"network":"off"}}`,
	} {
		if _, err := decodeRequest([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestReadBounded(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader("short\n"+strings.Repeat("x", 100)+"\nlast"), 16)
	if line, err := readBounded(r, 10); err != nil || string(line) != "short" {
		t.Fatalf("got %q, %v", line, err)
	}
	if _, err := readBounded(r, 10); err == nil || !strings.Contains(err.Error(), "over 10 bytes") {
		t.Fatalf("an over-long line: %v", err)
	}
}

// FuzzDecodeRequest feeds the supervisor arbitrary request lines: it never
// panics, and what it accepts is safe to hand to exec.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"path":"/bin/sh","argv":["sh","-c","true"],"dir":"/","env":["A=b"],"sandbox":{"mode":"read-only"}}`))
	f.Add([]byte(`{"path":"/bin/bash","argv":["bash"],"dir":"/tmp","sandbox":{"mode":"workspace-write","writable":["/tmp","/w"]}}`))
	f.Add([]byte(`{"path":"/x","argv":["x"],"dir":"/","env":["=x"]}`))
	f.Add([]byte(`{"path":"/x","argv":null,"dir":"/"}`))
	f.Add([]byte(`{"argv":["a"],"dir":"/","path":"/\u0000"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := decodeRequest(line)
		if err != nil {
			return
		}
		if !filepath.IsAbs(req.Path) || !filepath.IsAbs(req.Dir) || len(req.Argv) == 0 {
			t.Fatalf("accepted %+v", req)
		}
		for _, kv := range req.Env {
			if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
				t.Fatalf("accepted environment entry %q", kv)
			}
		}
		for _, s := range append(append([]string{req.Path, req.Dir}, req.Argv...), req.Env...) {
			if strings.IndexByte(s, 0) >= 0 {
				t.Fatalf("accepted a NUL in %q", s)
			}
		}
	})
}

// FuzzDecodeMessage feeds the owner arbitrary supervisor output through the
// line reader: no panic, lines stay within the bound, and accepted messages
// round-trip.
func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte("{\"pid\":42}\n{\"exit\":{\"code\":3}}\n"))
	f.Add([]byte("{\"error\":\"no such file\"}\n"))
	f.Add([]byte("{\"exit\":{\"code\":-1,\"signal\":9,\"core\":true}}\n"))
	f.Add([]byte("{\"signal\":15}\n{\"signal\":99}\n"))
	f.Add([]byte("garbage\n\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(data), 16)
		for {
			line, err := readBounded(r, 64)
			if err != nil {
				return
			}
			if len(line) > 64 || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line %q breaks the bound", line)
			}
			m, err := decodeMessage(line)
			if err != nil {
				continue
			}
			if m.PID < 0 || m.Signal < 0 || m.Signal > 64 {
				t.Fatalf("accepted %+v", m)
			}
			var again message
			if err := json.Unmarshal(encode(m), &again); err != nil {
				t.Fatalf("re-encoding %+v: %v", m, err)
			}
			if m.Exit != nil {
				if e := m.Exit.err(); (e == nil) != (m.Exit.Code == 0 && m.Exit.Signal == 0) {
					t.Fatalf("status %+v reads as %v", *m.Exit, e)
				}
			}
		}
	})
}
