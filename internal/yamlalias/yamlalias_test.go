package yamlalias

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// bomb is a document of levels anchors, each a list of nine aliases of the
// one before: 9^levels strings once expanded.
func bomb(levels int) string {
	var b strings.Builder
	b.WriteString("a0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 9), ","))
	}
	return b.String()
}

func check(t *testing.T, doc string, limit int) error {
	t.Helper()
	file, err := parser.ParseBytes([]byte(doc), 0)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return Check(file, limit)
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		limit     int
		line      int // the refused alias's line; 0: accepted
	}{
		{"no alias", "a: [1, 2, 3]\nb: {c: d}\n", 1, 0},
		{"reuse", "base: &base {model: x, retries: 3}\nfirst: *base\nsecond: {<<: *base, model: y}\n", MaxNodes, 0},
		{"unknown alias", "a: *nowhere\n", MaxNodes, 0},
		{"at the bound", "a: &a [1, 2, 3]\nb: *a\n", 4, 0},
		{"past the bound", "a: &a [1, 2, 3]\nb: *a\nc: *a\n", 4, 3},
		{"nested aliases expand", "a: &a [1, 2]\nb: &b [*a, *a, *a]\nc: *b\n", 12, 3},
		{"a tagged anchor", "a: &a !!seq [1, 2]\nb: *a\nc: *a\n", 4, 3},
		{"in a second document", "a: 1\n---\nb: &b [1, 2, 3, 4, 5]\nc: [*b, *b]\n", 10, 4},
		{"a bomb of seven levels", bomb(7), MaxNodes, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check(t, tc.doc, tc.limit)
			var ae *Error
			switch {
			case tc.line == 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.line != 0 && !errors.As(err, &ae):
				t.Fatalf("accepted (err %v)", err)
			case tc.line != 0 && ae.Line != tc.line:
				t.Fatalf("refused at line %d, want %d: %v", ae.Line, tc.line, err)
			}
		})
	}
}

// A bomb of any depth is refused at once: the walk never expands more
// than the bound.
func TestBombIsRefusedFast(t *testing.T) {
	start := time.Now()
	err := check(t, bomb(40), MaxNodes)
	if err == nil || !strings.Contains(err.Error(), "line 5: YAML aliases expand to more than 10000 nodes") {
		t.Fatalf("Check = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Check took %v", d)
	}
}

func TestCheckNil(t *testing.T) {
	if err := Check(nil, 1); err != nil {
		t.Fatal(err)
	}
}

// FuzzCheck reads any bytes as YAML: Check never panics, and a document
// it accepts decodes quickly (its aliases stand for a bounded number of
// nodes).
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{
		bomb(3), bomb(5), "a: &a [1, 2]\nb: {<<: *a}\n", "a: &a [*a]\n", "- &x !!str y\n- *x\n- *y\n",
		"a: &a {b: &b [1], c: *b}\nd: [*a, *a, *b]\n---\ne: *a\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parser.ParseBytes(data, 0)
		if err != nil {
			return
		}
		if Check(file, MaxNodes) != nil {
			return
		}
		start := time.Now()
		var v any
		yaml.Unmarshal(data, &v)
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("an accepted document took %v to decode: %q", took, data)
		}
	})
}
