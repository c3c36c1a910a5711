package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/internal/secret/pattern"
)

// ScrubEnv returns the "NAME=value" entries of env a child may see. It drops
// every variable whose name starts with DSH_ (the harness's own) or says it
// holds a credential (pattern.Name: KEY, TOKEN, SECRET, PASSWORD, _PAT,
// OTEL_EXPORTER_OTLP_HEADERS, …), and every variable whose value holds a
// credential in a known format (pattern.Find: a URL with a password, a
// GitHub or OpenAI key, a JWT, …) but for the paths PATH, HOME, PWD and
// TMPDIR, which a command cannot do without; all unless its exact name is
// in pass. It always drops HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY
// in any letter case (set one through Spec.Env to give it to a child); it
// drops malformed entries and keeps the rest in order.
func ScrubEnv(env, pass []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		upper := strings.ToUpper(name)
		switch upper {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY":
			continue
		}
		if (strings.HasPrefix(upper, "DSH_") || pattern.Name(name) || !isPath(name) && pattern.Value(value)) && !contains(pass, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// isPath reports whether a variable is one of the paths a command needs,
// whose value is never taken for a credential.
func isPath(name string) bool {
	switch name {
	case "PATH", "HOME", "PWD", "TMPDIR":
		return true
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// childEnv is ScrubEnv(BaseEnv, PassEnv) overlaid with Env: one entry per
// name, an Env entry replacing a same-named base entry.
func childEnv(spec Spec) ([]string, error) {
	base := spec.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	for _, kv := range spec.Env {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return nil, fmt.Errorf("proc: environment entry %q is not NAME=value", kv)
		}
	}
	all := append(ScrubEnv(base, spec.PassEnv), spec.Env...)
	// Keep the last entry of each name, in order.
	seen := make(map[string]bool, len(all))
	out := make([]string, 0, len(all))
	for i := len(all) - 1; i >= 0; i-- {
		name, _, _ := strings.Cut(all[i], "=")
		if !seen[name] {
			seen[name] = true
			out = append(out, all[i])
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// resolve finds the program to run. A name without a slash is looked up in
// the absolute directories of the child's PATH (the parent's when the child
// has none); a relative path with a slash is taken relative to dir.
func resolve(name, dir string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		path := name
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		if err := checkExecutable(path); err != nil {
			return "", fmt.Errorf("proc: program %s: %w", name, err)
		}
		return path, nil
	}
	pathList, ok := lookupEnv(env, "PATH")
	if !ok {
		pathList = os.Getenv("PATH")
	}
	for _, d := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(d) {
			continue // never run something from a relative (or empty) PATH entry
		}
		path := filepath.Join(d, name)
		if checkExecutable(path) == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("proc: program %q not found in PATH: %w", name, exec.ErrNotFound)
}

// checkExecutable requires path to be an executable file.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fs.ErrNotExist
	case err != nil:
		return err
	case fi.IsDir():
		return errors.New("is a directory")
	case fi.Mode()&0o111 == 0:
		return fmt.Errorf("not executable: %w", fs.ErrPermission)
	}
	return nil
}

// lookupEnv returns the value of the last entry named name in env.
func lookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if n, v, ok := strings.Cut(env[i], "="); ok && n == name {
			return v, true
		}
	}
	return "", false
}
