package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/bench/internal/dshbin"
)

// refName is the scenario that runs the reference harness: the fork
// scenario's script, played by the reference's own runtime (rc.8) through
// its published DeepSeek adapter.
const refName = "ref-fork"

//go:embed cache-fork.mjs
var forkScript []byte

// refExtras are the packages the fork scenario adds to the harness's pinned
// set: the reference's DeepSeek chat-completions adapter and the peers it
// imports, all of the harness's release family.
var refExtras = []string{
	"@deepseek-ai/dsh-llm-deepseek@0.1.0-rc.8",
	"@deepseek-ai/dsh-credentials@0.1.0-rc.8",
	"@deepseek-ai/dsh-launch-environment@0.1.0-rc.8",
	"@deepseek-ai/dsh-anonymous-user-id@0.1.0-rc.8",
}

// reference runs the fork scenario's script on the reference harness.
func (o *options) reference(tmp string) (result, error) {
	res := result{Scenario: refName}
	node, err := o.refSetup()
	if err != nil {
		return res, err
	}
	var sc *scenario
	for _, s := range scenarios() {
		if s.name == "fork" {
			sc = s
		}
	}
	dir := filepath.Join(tmp, refName)
	srv := o.server(sc)
	defer srv.Close()
	cwd, _, err := workspace(dir, sc, srv.URL, "")
	if err != nil {
		return res, err
	}
	home := filepath.Join(dir, "home") // the adapter keeps an anonymous user id under $HOME
	if err := os.MkdirAll(home, 0o700); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"cache-fork.mjs", srv.URL, cwd}, sc.prompts...)...)
	cmd.Dir = o.refDir
	cmd.Env = dshbin.Environ(map[string]string{"HOME": home, "DEEPSEEK_API_KEY": "x"})
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	srv.Close()
	xs := srv.Exchanges()
	if kerr := o.keepBodies(refName, xs); kerr != nil && err == nil {
		err = kerr
	}
	if err != nil {
		return res, fmt.Errorf("node cache-fork.mjs: %v\n%s", err, tail(out.String(), 2000))
	}
	return analyze(res, sc, srv, xs), nil
}

// refSetup copies the harness to its writable place, installs it once
// (npm ci) with the extra packages, writes the scenario's script there and
// returns the Node 22 binary.
func (o *options) refSetup() (string, error) {
	if o.refDir == "" {
		root, err := dshbin.Root()
		if err != nil {
			return "", err
		}
		o.refDir = filepath.Join(root, ".cache", "bench-ref")
	}
	if _, err := os.Stat(filepath.Join(o.refDir, "package.json")); err != nil {
		if err := os.MkdirAll(filepath.Dir(o.refDir), 0o755); err != nil {
			return "", err
		}
		if out, err := exec.Command("cp", "-r", o.refSrc, o.refDir).CombinedOutput(); err != nil {
			return "", fmt.Errorf("copy %s: %v: %s", o.refSrc, err, out)
		}
	}
	node := filepath.Join(o.refDir, "node_modules", ".bin", "node")
	npm := func(args ...string) error {
		fmt.Fprintln(os.Stderr, "cache: npm", args[0], "in", o.refDir)
		cmd := exec.Command("npm", args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = o.refDir, os.Stderr, os.Stderr
		return cmd.Run()
	}
	if _, err := os.Stat(node); err != nil {
		if err := npm("ci"); err != nil {
			return "", fmt.Errorf("npm ci: %w", err)
		}
		stamp := []byte(time.Now().UTC().Format(time.RFC3339) + "\n") // what cmd/reference looks for
		if err := os.WriteFile(filepath.Join(o.refDir, ".npm-ci.stamp"), stamp, 0o644); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(filepath.Join(o.refDir, "node_modules", "@deepseek-ai", "dsh-llm-deepseek")); err != nil {
		if err := npm(append([]string{"install", "--no-save"}, refExtras...)...); err != nil {
			return "", fmt.Errorf("npm install: %w", err)
		}
	}
	return node, os.WriteFile(filepath.Join(o.refDir, "cache-fork.mjs"), forkScript, 0o644)
}
