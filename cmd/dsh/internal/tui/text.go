package tui

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// sanitize makes untrusted text (the model's, a tool's, a child's) safe to
// draw: escape sequences are removed, so text cannot move the cursor, clear
// the screen, set the clipboard or retitle the window; tabs become spaces;
// other control characters, invalid UTF-8 and the bidirectional overrides
// that reorder what a reader sees are dropped. Newlines stay.
func sanitize(s string) string {
	if isPlain(s) {
		return s
	}
	s = ansi.Strip(s)
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
		case r == '\n':
			b.WriteByte('\n')
		case r == '\t':
			b.WriteString("    ")
		case unicode.IsControl(r), isBidiControl(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isPlain reports whether s is printable ASCII and newlines only, which
// sanitize returns unchanged.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\n') || c >= 0x7f {
			return false
		}
	}
	return true
}

// isBidiControl reports the Unicode bidirectional embedding, override and
// isolate controls.
func isBidiControl(r rune) bool {
	return (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') || r == '\u200e' || r == '\u200f' || r == '\u061c'
}

// oneLine sanitizes s and folds it onto one line of at most n cells.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(sanitize(s)), " ")
	return ansi.Truncate(s, max(n, 1), "…")
}

// wrap wraps s (sanitized text, or text with styles) at width cells: words
// where it can, hard breaks within longer words.
func wrap(s string, width int) string {
	return ansi.Wrap(s, max(width, 1), "")
}

// indentLines prefixes every line of s: first on the first line, rest on
// the others.
func indentLines(s, first, rest string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		if i == 0 {
			lines[i] = first + lines[i]
		} else {
			lines[i] = rest + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// elapsed renders a duration as a person reads a clock: 4s, 2m05s, 1h02m.
func elapsed(d time.Duration) string {
	d = d.Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// tokens renders a token count compactly: 950, 12.3k, 4.1M.
func tokens(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprintf("%.1fM", float64(n)/1_000_000)
}

// ansiTruncate cuts s (which may hold styles) to n cells.
func ansiTruncate(s string, n int) string { return ansi.Truncate(s, max(n, 1), "…") }
