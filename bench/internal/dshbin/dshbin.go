// Package dshbin builds the dsh command from the working tree (../cmd/dsh
// relative to the bench module) into a temporary directory, and prepares
// the environment of a `dsh acp` child that needs no key and no network:
// a fresh DSH_HOME, DEEPSEEK_API_KEY=x and a loopback DEEPSEEK_BASE_URL.
package dshbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Root finds the main module's root: the parent of the bench module, found
// by walking up from the working directory to bench/go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/dsh-go/dsh/bench") {
			return filepath.Dir(dir), nil
		}
		if err == nil && strings.Contains(string(b), "module github.com/dsh-go/dsh\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from inside the bench module (cannot find bench/go.mod)")
		}
		dir = parent
	}
}

// Build builds ./cmd/dsh of the main module into dir, with the build tags
// given (e.g. "temporal" for `dsh worker`), and returns the binary.
func Build(dir string, tags ...string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "dsh")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "./cmd/dsh")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s ./cmd/dsh: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// Env returns the variables of a loopback `dsh acp`: DSH_HOME under dir
// (created), the dummy key and baseURL.
func Env(dir, baseURL string) (map[string]string, error) {
	home := filepath.Join(dir, "dsh-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	return map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "x", "DEEPSEEK_BASE_URL": baseURL}, nil
}

// Environ renders env as KEY=VALUE strings after the minimal PATH and HOME.
func Environ(env map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
