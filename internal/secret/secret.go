// Package secret keeps the credentials dsh holds out of reach of the
// commands it runs, and out of what it writes.
//
// Take moves the credential variables out of the process environment into
// a Store at start-up: they leave os.Environ (so no child inherits them),
// and on Linux their bytes are zeroed in the initial environment block
// too, so /proc/<dsh>/environ no longer shows them; the process then makes
// itself non-dumpable, so /proc/<dsh>/mem, environ and fd are closed to
// other processes of the same user, and to root ones without
// CAP_SYS_PTRACE (which internal/proc drops from every child). Code that
// needs a key reads it through Store.Getenv.
//
// A Redactor replaces known secret values with "[REDACTED]" in strings,
// written streams and stored session events, and credentials in a known
// format (package pattern) in strings and written streams. Redaction is
// best effort: a command that transforms a secret (rev, base64) prints it
// in a form no redactor knows.
package secret

import (
	"os"
	"slices"
	"strings"
)

// Store holds the credentials taken out of the environment.
type Store struct {
	vars map[string]string
}

// Take moves the named variables that are set out of the environment into
// a Store (see the package documentation). The error, if any, says what
// could not be hidden; the Store is valid either way.
func Take(names []string) (*Store, error) {
	s := &Store{vars: map[string]string{}}
	var taken []string
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok && name != "" {
			s.vars[name] = strings.Clone(v)
			os.Unsetenv(name)
			taken = append(taken, name)
		}
	}
	return s, hide(taken)
}

// Getenv returns a taken variable's value, else the environment's.
func (s *Store) Getenv(name string) string {
	if v, ok := s.vars[name]; ok {
		return v
	}
	return os.Getenv(name)
}

// Names lists the taken variables, sorted.
func (s *Store) Names() []string {
	var out []string
	for n := range s.vars {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Values lists what to redact of the taken variables: their values, and
// of those that are URLs with secrets only the secret parts (see
// URLSecrets).
func (s *Store) Values() []string {
	var values []string
	for _, v := range s.vars {
		if parts := URLSecrets(v); len(parts) > 0 {
			values = append(values, parts...)
		} else {
			values = append(values, v)
		}
	}
	return values
}
