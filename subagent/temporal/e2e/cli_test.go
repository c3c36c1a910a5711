package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// readmeFleetConfig returns the README's temporal configuration, pointed at
// the test's cluster and task queue.
func readmeFleetConfig(t *testing.T, queue string) string {
	t.Helper()
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```yaml\n# dsh.yaml: the same file on the parent's host and on every worker\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("the README has no temporal configuration")
	}
	for _, r := range [][2]string{{"hostPort: localhost:7233", "hostPort: \"" + hostPort + "\""},
		{"namespace: default", "namespace: " + namespace}, {"taskQueue: dsh-children", "taskQueue: " + queue}} {
		if !strings.Contains(block, r[0]) {
			t.Fatalf("the README's temporal configuration lacks %q", r[0])
		}
		block = strings.Replace(block, r[0], r[1], 1)
	}
	return block
}

// The README's setup, end to end through the CLI: `dsh run` on one host
// delegates through subagent_fleet to a `dsh worker` with its own DSH_HOME;
// the child's session reaches the parent's store with its lineage, and
// `dsh sessions list` and `show` show it under its parent.
func TestCLIDelegatesToTheFleet(t *testing.T) {
	model := llmtest.Start(func(req llmtest.Request) llmtest.Reply {
		switch {
		case req.Child:
			return llmtest.Reply{Text: "three Go files"}
		case len(req.ToolResults) == 0:
			return llmtest.Reply{Reasoning: "delegate", ToolCall: &llmtest.ToolCall{Name: "subagent_fleet",
				Arguments: `{"description":"count the files","prompt":"Count the Go files."}`}}
		}
		return llmtest.Reply{Text: "The child says: " + req.ToolResults[0]}
	})
	model.Config.SetKeepAlivesEnabled(false)
	t.Cleanup(model.Close)
	f := &fleet{t: t, queue: "dsh-e2e-cli", home: t.TempDir(), work: t.TempDir(), model: model,
		env: []string{"DEEPSEEK_BASE_URL=" + model.URL}, hostPort: hostPort, namespace: namespace, cluster: cluster}
	config := readmeFleetConfig(t, f.queue)
	f.config = filepath.Join(f.home, "dsh.yaml")
	if err := os.WriteFile(f.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	f.worker("cli-worker", 2)
	parentHome := t.TempDir()
	if err := os.WriteFile(filepath.Join(parentHome, "dsh.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	dsh := func(args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(dshBin, args...)
		cmd.Dir = parentHome
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + parentHome, "DSH_HOME=" + parentHome,
			"DEEPSEEK_BASE_URL=" + model.URL, "DEEPSEEK_API_KEY=sk-loopback"}
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("dsh %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	out, errOut := dsh("run", "Ask the fleet to count the Go files.")
	if !strings.Contains(out, "The child says: three Go files") {
		t.Fatalf("dsh run printed:\n%s\n%s", out, errOut)
	}
	if !strings.Contains(errOut, "fleet · count the files") {
		t.Errorf("dsh run's stderr does not show the child:\n%s", errOut)
	}
	list, _ := dsh("sessions", "list", "--json") // this directory's sessions
	var rows []struct{ ID, Parent, Status, Cwd string }
	if err := json.Unmarshal([]byte(list), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("sessions list --json: %v\n%s", err, list)
	}
	parent, child := rows[0], rows[1]
	if child.Parent != parent.ID || child.Status != "completed" || child.Cwd != parent.Cwd {
		t.Errorf("sessions: parent %+v, child %+v: want the child under its parent, completed", parent, child)
	}
	show, _ := dsh("sessions", "show", child.ID[:8])
	if !strings.Contains(show, "three Go files") || !strings.Contains(show, "Count the Go files.") {
		t.Errorf("sessions show of the child:\n%s", show)
	}
	// The worker's own store holds nothing of the child: its log went
	// through the cluster.
	if entries, _ := os.ReadDir(filepath.Join(f.home, "sessions")); len(entries) != 0 {
		t.Errorf("the worker stored sessions of its own: %v", entries)
	}
}
