package a2achild

import (
	"strings"
	"testing"
)

func TestSSEData(t *testing.T) {
	in := ": keep-alive\r\n\r\nid: 1\r\ndata: {\"a\":\r\ndata:1}\r\n\r\nevent: x\ndata: two\n\ndata: last"
	var got []string
	for data, err := range sseData(strings.NewReader(in)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(data))
	}
	if want := []string{"{\"a\":\n1}", "two", "last"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", got, want)
	}
	long := "data: " + strings.Repeat("x", MaxResponse+1) + "\n\n"
	for _, err := range sseData(strings.NewReader(long)) {
		if err == nil || !strings.Contains(err.Error(), "longer than") {
			t.Errorf("a line past the bound: %v", err)
		}
	}
}
