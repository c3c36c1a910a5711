package main

import (
	"errors"
	"strings"
	"testing"
)

func TestVerdict(t *testing.T) {
	ok := limit{name: "a", got: 1, max: 2, unit: "B"}
	over := limit{name: "fan-out", got: 23_000, max: 22_000, unit: "B"}
	broken := limit{name: "eino", err: errors.New("compare failed")}
	for _, tc := range []struct {
		checks []limit
		code   int
		says   []string
	}{
		{[]limit{ok}, 0, []string{"ok    a"}},
		{[]limit{ok, over}, 1, []string{"OVER  fan-out", "limit 22000.000 (+4.5 %)", "raise the limit in bench/cmd/guard"}},
		{[]limit{over, broken}, 2, []string{"ERROR eino", "compare failed"}},
	} {
		if got := verdict(tc.checks); got != tc.code {
			t.Errorf("verdict = %d, want %d", got, tc.code)
		}
		out := report(tc.checks)
		for _, s := range tc.says {
			if !strings.Contains(out, s) {
				t.Errorf("report lacks %q:\n%s", s, out)
			}
		}
	}
}
