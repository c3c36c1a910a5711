package subagent

import (
	"cmp"
	"time"
)

// ChildTimeouts bound an out-of-process child's start and teardown. The
// providers that run a child process embed them in their config (inline in
// YAML).
type ChildTimeouts struct {
	// ReadyTimeout bounds the wait until the child is ready (default 30s).
	ReadyTimeout time.Duration `yaml:"readyTimeout"`
	// CancelGrace is how long a cancelled child may take to end its turn
	// before its process is stopped (default 5s).
	CancelGrace time.Duration `yaml:"cancelGrace"`
	// EOFGrace and TermGrace are the teardown ladder's waits after closing
	// stdin and after SIGTERM (defaults 2s and 3s).
	EOFGrace  time.Duration `yaml:"eofGrace"`
	TermGrace time.Duration `yaml:"termGrace"`
}

// WithDefaults returns t with every unset timeout at its default.
func (t ChildTimeouts) WithDefaults() ChildTimeouts {
	t.ReadyTimeout = cmp.Or(t.ReadyTimeout, 30*time.Second)
	t.CancelGrace = cmp.Or(t.CancelGrace, 5*time.Second)
	t.EOFGrace = cmp.Or(t.EOFGrace, 2*time.Second)
	t.TermGrace = cmp.Or(t.TermGrace, 3*time.Second)
	return t
}

// Negative returns the YAML key and value of the first negative timeout, in
// field order, or "" when none is.
func (t ChildTimeouts) Negative() (key string, d time.Duration) {
	for _, f := range []struct {
		key string
		d   time.Duration
	}{{"readyTimeout", t.ReadyTimeout}, {"cancelGrace", t.CancelGrace}, {"eofGrace", t.EOFGrace}, {"termGrace", t.TermGrace}} {
		if f.d < 0 {
			return f.key, f.d
		}
	}
	return "", 0
}
