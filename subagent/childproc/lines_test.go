package childproc

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestLineReader(t *testing.T) {
	lr := NewLineReader(strings.NewReader("a\r\n\nbb\n"+strings.Repeat("c", 10)+"\nlast"), 8, "test")
	for _, want := range []string{"a", "", "bb"} {
		if got, err := lr.Next(); err != nil || string(got) != want {
			t.Fatalf("next = %q, %v; want %q", got, err, want)
		}
	}
	var long *LineTooLongError
	if _, err := lr.Next(); !errors.As(err, &long) || long.Limit != 8 {
		t.Fatalf("err = %v", err)
	}
	lr = NewLineReader(strings.NewReader(strings.Repeat("d", 8)+"\nlast"), 8, "test")
	for _, want := range []string{"dddddddd", "last"} {
		if got, err := lr.Next(); err != nil || string(got) != want {
			t.Fatalf("next = %q, %v; want %q", got, err, want)
		}
	}
	if _, err := lr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v", err)
	}
}

// The line buffer never outgrows the limit, and a line over it is an
// error that stays.
func TestLineReaderBounds(t *testing.T) {
	lr := NewLineReader(strings.NewReader(strings.Repeat("x", 5000)+"\nnext\n"), 4096, "test")
	if _, err := lr.Next(); err == nil || lr.Cap() > 4096 {
		t.Fatalf("err %v, buffer %d", err, lr.Cap())
	}
	var long *LineTooLongError
	if _, err := lr.Next(); !errors.As(err, &long) || long.ErrorCode() != CodeLineTooLong {
		t.Fatalf("second call: %v", err)
	}
}
