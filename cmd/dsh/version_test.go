package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/proc"
)

func TestVersionOf(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "83e2ed177f3d1872aa148e7d5d371daddf464da8"},
		{Key: "vcs.time", Value: "2026-11-30T07:01:06Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name    string
		info    *debug.BuildInfo
		stamped buildVersion
		want    string
	}{
		{"no build information", nil, buildVersion{},
			"dsh (devel)\ncommit: unknown\ndate: unknown\ngo: " + runtime.Version() + " " + platform + "\n"},
		{"go install @version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, buildVersion{},
			"dsh v1.2.3\ncommit: unknown\ndate: unknown\ngo: go1.26.8 " + platform + "\n"},
		{"go build in a checkout with changes", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Version: "v0.0.0-20261130070106-83e2ed177f3d+dirty"}, Settings: vcs}, buildVersion{},
			"dsh v0.0.0-20261130070106-83e2ed177f3d+dirty\ncommit: 83e2ed177f3d1872aa148e7d5d371daddf464da8 (modified)\n" +
				"date: 2026-11-30T07:01:06Z\ngo: go1.26.8 " + platform + "\n"},
		{"release stamps win", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			buildVersion{Version: "v1.3.0", Commit: "0123456789abcdef0123456789abcdef01234567", Date: "2026-12-01T10:00:00Z"},
			"dsh v1.3.0\ncommit: 0123456789abcdef0123456789abcdef01234567\ndate: 2026-12-01T10:00:00Z\ngo: go1.26.8 " + platform + "\n"},
		{"go install @latest of an untagged commit", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Version: "v0.0.0-20261130071017-0ffc0f34f7ca"}}, buildVersion{},
			"dsh v0.0.0-20261130071017-0ffc0f34f7ca\ncommit: 0ffc0f34f7ca\ndate: 2026-11-30T07:10:17Z\ngo: go1.26.8 " + platform + "\n"},
		{"a pseudo-version after a tag", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Version: "v1.2.4-0.20261130071017-0ffc0f34f7ca"}}, buildVersion{},
			"dsh v1.2.4-0.20261130071017-0ffc0f34f7ca\ncommit: 0ffc0f34f7ca\ndate: 2026-11-30T07:10:17Z\ngo: go1.26.8 " + platform + "\n"},
		{"a prerelease tag is no pseudo-version", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Version: "v1.3.0-rc.20261130071017"}}, buildVersion{},
			"dsh v1.3.0-rc.20261130071017\ncommit: unknown\ndate: unknown\ngo: go1.26.8 " + platform + "\n"},
		{"an empty main version", &debug.BuildInfo{GoVersion: "go1.26.8"}, buildVersion{Commit: "abc", Modified: true},
			"dsh (devel)\ncommit: abc (modified)\ndate: unknown\ngo: go1.26.8 " + platform + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf(tc.info, tc.stamped).String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// dsh --version and the agentInfo of dsh acp's initialize name the same
// version, in a plain build and in a build stamped as scripts/release.sh
// stamps one.
func TestVersionFlagAndACPAgree(t *testing.T) {
	stamped := filepath.Join(t.TempDir(), "dsh")
	ldflags := "-X main.stampVersion=v9.8.7 -X main.stampCommit=0123456789abcdef0123456789abcdef01234567 " +
		"-X main.stampDate=2026-12-01T10:00:00Z -X main.stampModified=true"
	if out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", stamped, "github.com/dsh-go/dsh/cmd/dsh").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name, bin, want string
	}{
		{"plain", dshBinary, ""},
		{"stamped", stamped, "dsh v9.8.7\ncommit: 0123456789abcdef0123456789abcdef01234567 (modified)\ndate: 2026-12-01T10:00:00Z\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(tc.bin, "--version").Output()
			if err != nil {
				t.Fatalf("--version: %v", err)
			}
			if !strings.HasPrefix(string(out), tc.want) || !strings.Contains(string(out), "\ngo: "+runtime.Version()) {
				t.Fatalf("--version printed\n%s\nwant it to start with\n%s", out, tc.want)
			}
			version, _, _ := strings.Cut(strings.TrimPrefix(string(out), "dsh "), "\n")
			if got := acpAgentVersion(t, tc.bin); got != version {
				t.Errorf("initialize reports version %q, --version %q", got, version)
			}
		})
	}
	if err := proc.NoChildren(); err != nil {
		t.Error(err)
	}
}

// acpAgentVersion starts bin acp, sends initialize and returns the version
// in the answer's agentInfo; it then closes stdin and waits for bin to exit.
func acpAgentVersion(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin, "acp")
	cmd.Env = []string{"DSH_HOME=" + t.TempDir()}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	line, readErr := bufio.NewReader(stdout).ReadBytes('\n')
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("dsh acp exited with %v", err)
	}
	var resp struct {
		ID     int `json:"id"`
		Result struct {
			AgentInfo struct{ Name, Version string } `json:"agentInfo"`
		} `json:"result"`
	}
	if readErr != nil || json.Unmarshal(line, &resp) != nil || resp.ID != 1 || resp.Result.AgentInfo.Name != "dsh" {
		t.Fatalf("initialize answered %q (%v)", line, readErr)
	}
	return resp.Result.AgentInfo.Version
}
