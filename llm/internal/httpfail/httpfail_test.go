package httpfail

import (
	"net/http"
	"testing"
	"time"
)

// Retry-After is read in seconds or as an HTTP date, by every route (the
// Anthropic route read only seconds).
func TestRetryAfterMs(t *testing.T) {
	in := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	for _, tc := range []struct {
		header   string
		min, max int64
	}{
		{"", 0, 0},
		{"2", 2000, 2000},
		{" 0.5 ", 500, 500},
		{"-3", 0, 0},
		{"1e12", 0, 0},
		{"soon", 0, 0},
		{in(30 * time.Second), 28_000, 30_000},
		{in(-time.Minute), 0, 0},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("Retry-After", tc.header)
		}
		if got := RetryAfterMs(h); got < tc.min || got > tc.max {
			t.Errorf("Retry-After %q: %d ms, want %d–%d", tc.header, got, tc.min, tc.max)
		}
	}
}
