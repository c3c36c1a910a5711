package jsonrpcframe

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	for v, want := range map[string]bool{`"a"`: true, `7`: true, `-1.5`: true, ` 3 `: true,
		`null`: false, `{"a":1}`: false, `[1]`: false, `true`: false, `1e400`: false, `"unterminated`: false, ``: false} {
		if got := ValidID(json.RawMessage(v)); got != want {
			t.Errorf("ValidID(%s) = %v", v, got)
		}
	}
}

func TestDepth(t *testing.T) {
	for s, want := range map[string]int{`1`: 0, `{}`: 1, `[[{"a":[1]}]]`: 4, `{"s":"[[[[\"]]"}`: 1, strings.Repeat("[", 9): 9, `]]]`: 0} {
		if got := Depth([]byte(s)); got != want {
			t.Errorf("Depth(%s) = %d, want %d", s, got, want)
		}
	}
}

func TestPeek(t *testing.T) {
	id, resp, req := Peek([]byte(`{"jsonrpc":"2.0","id":"x","result":{"a":`))
	if string(id) != `"x"` || !resp || req {
		t.Errorf("cut response: %s %v %v", id, resp, req)
	}
	id, resp, req = Peek([]byte(`{"id":{"a":1},"method":"m"}`))
	if id != nil || resp || !req {
		t.Errorf("object id: %s %v %v", id, resp, req)
	}
}

// Read keeps at most limit+1 bytes of a line and reports its whole length.
func TestRead(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader("short\n"+strings.Repeat("x", 100)+"\nlast"), 16)
	for _, want := range []struct {
		kept string
		size int
		err  error
	}{{"short", 5, nil}, {strings.Repeat("x", 11), 100, nil}, {"last", 4, io.EOF}} {
		kept, size, err := Read(r, nil, 10)
		if string(kept) != want.kept || size != want.size || err != want.err {
			t.Errorf("Read = %q %d %v, want %q %d %v", kept, size, err, want.kept, want.size, want.err)
		}
	}
}
