package config

import (
	"strings"
	"testing"
)

// An unknown key names the closest key its block takes, when one is close:
// at the top level, in a block, in flow style, in a list item.
func TestUnknownKeyDidYouMean(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"model:\n  - name: x\n", `unknown field "model" (at "model:") (did you mean "models"?)`},
		{"agent:\n  maxStep: 10\n", `unknown field "maxStep" (at "maxStep: 10") (did you mean "maxSteps"?)`},
		{"agent: {maxStep: 10}\n", `(did you mean "maxSteps"?)`},
		{"models:\n  - name: local\n    baseUrl: http://127.0.0.1:1/v1\n", `(did you mean "baseURL"?)`},
		{"agent:\n  zzzzzzzz: 1\n", `unknown field "zzzzzzzz"`},
	} {
		_, err := Parse("t.yaml", []byte(c.yaml), func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
		if strings.Contains(c.yaml, "zzz") && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%q: a suggestion for a key nothing is close to: %v", c.yaml, err)
		}
	}
}
