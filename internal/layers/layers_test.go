package layers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/dsh-go/dsh/"

// rule forbids pkg to import forbidden: directly, or when deep is set
// through any chain of imports (test files are not counted).
type rule struct {
	pkg, forbidden string
	deep           bool
	why            string
}

// TestImportsPointDown holds the rule that packages import only downward
// (CONTRIBUTING.md, "Layout") where an import once pointed up:
//
//   - hook depends on no built-in tool: the names it matches (and their
//     Claude Code names) live in tool/toolname, below hook, agentdef and
//     tool/builtin;
//   - internal/llmtest depends on no subagent provider: it recognises a
//     child's first message by the frame package prompt owns, so that the
//     tests of subagent/inproc itself can use it;
//   - cmd/dsh does not import subagent/inproc: it splits a child's first
//     message with package prompt, and gets its providers from config;
//   - subagent/continuable depends on no subagent provider: it builds no
//     child, the ChildBuilder it is handed (inproc's) does.
func TestImportsPointDown(t *testing.T) {
	rules := []rule{
		{pkg: "hook", forbidden: "tool/builtin", deep: true, why: "tool names come from tool/toolname"},
		{pkg: "internal/llmtest", forbidden: "subagent/inproc", deep: true, why: "a child's frame is split by prompt.SplitChildTask"},
		{pkg: "cmd/dsh", forbidden: "subagent/inproc", why: "a child's frame is split by prompt.SplitChildTask; providers come from config"},
		{pkg: "subagent/continuable", forbidden: "subagent/inproc", deep: true, why: "continuable children are built by the ChildBuilder it is handed"},
	}
	var pkgs []string
	for _, r := range rules {
		pkgs = append(pkgs, module+r.pkg)
	}
	graph := imports(t, pkgs...)
	for _, r := range rules {
		from, to := module+r.pkg, module+r.forbidden
		if _, ok := graph[from]; !ok {
			t.Errorf("go list did not report %s", from)
			continue
		}
		if !r.deep {
			if slices.Contains(graph[from], to) {
				t.Errorf("%s imports %s (%s)", r.pkg, r.forbidden, r.why)
			}
			continue
		}
		if chain := path(graph, from, to); chain != nil {
			t.Errorf("%s depends on %s through %s (%s)", r.pkg, r.forbidden, strings.Join(chain, " → "), r.why)
		}
	}
}

// imports runs go list on pkgs and returns the import graph of them and
// their dependencies, test files left out.
func imports(t *testing.T, pkgs ...string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Imports,Error"}, pkgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		graph[p.ImportPath] = p.Imports
	}
	return graph
}

// path returns a chain of imports from one package to another, shortest
// first found, or nil when there is none.
func path(graph map[string][]string, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, strings.TrimPrefix(p, module))
			}
			slices.Reverse(chain)
			return chain
		}
		for _, q := range graph[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}
