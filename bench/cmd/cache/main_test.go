package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/internal/proc"

	"github.com/dsh-go/dsh/bench/internal/promptcache"
	"github.com/dsh-go/dsh/bench/internal/scriptllm"
)

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler)) // as main does
	goleak.VerifyTestMain(m)
}

func TestActor(t *testing.T) {
	msgs := func(ms ...scriptllm.Message) scriptllm.Request { return scriptllm.Request{Messages: ms} }
	sys := scriptllm.Message{Role: "system", Text: "[cb:not.me] in the system prompt"}
	user := func(s string) scriptllm.Message { return scriptllm.Message{Role: "user", Text: s} }
	asst := scriptllm.Message{Role: "assistant", ToolCalls: 1}
	tool := scriptllm.Message{Role: "tool", Text: "[cb:not.me] in a tool result"}
	for _, c := range []struct {
		req  scriptllm.Request
		name string
		step int
		ok   bool
	}{
		{msgs(sys, user("[cb:p] go")), "p", 0, true},
		{msgs(sys, user("[cb:p] go"), asst, tool, asst, tool), "p", 2, true},
		// a fork child: the parent's turns, then its own prompt, then the
		// runtime context the reference appends
		{msgs(sys, user("[cb:p] go"), asst, tool, user("[cb:p.child] review"), user("you are a subagent")), "p.child", 0, true},
		// a notice after the tagged prompt counts the steps on
		{msgs(sys, user("[cb:bg] go"), asst, tool, asst, user("background task finished")), "bg", 2, true},
		{msgs(sys, user("no tag")), "", 0, false},
	} {
		name, step, ok := actor(c.req)
		if name != c.name || step != c.step || ok != c.ok {
			t.Errorf("actor(%+v) = %q, %d, %v; want %q, %d, %v", c.req.Messages, name, step, ok, c.name, c.step, c.ok)
		}
	}
}

// Every script is consistent: each delegated prompt's tag has a script,
// each awaited key names a scripted step, and the count of delegations is
// the scenario's.
func TestScriptsAreConsistent(t *testing.T) {
	for _, sc := range scenarios() {
		delegations := 0
		for name, steps := range sc.script {
			for i, rep := range steps {
				for _, k := range rep.Await {
					actor, s, _ := strings.Cut(k, "#")
					if step, err := strconv.Atoi(s); err != nil || step < 0 || step >= len(sc.script[actor]) {
						t.Errorf("%s: %s#%d awaits %s, which is not scripted", sc.name, name, i, k)
					}
				}
				for _, c := range rep.Calls {
					if !promptcache.IsDelegation(c.Name) {
						continue
					}
					delegations++
					var args struct{ Prompt string }
					if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
						t.Fatal(err)
					}
					m := tagRE.FindStringSubmatch(args.Prompt)
					if m == nil || sc.script[m[1]] == nil {
						t.Errorf("%s: the prompt %q has no scripted actor", sc.name, args.Prompt)
					}
				}
			}
		}
		if delegations != sc.children {
			t.Errorf("%s: %d delegations, children = %d", sc.name, delegations, sc.children)
		}
		if !sc.acp && len(sc.prompts) != 1 {
			t.Errorf("%s: dsh run takes one prompt", sc.name)
		}
	}
}

// The command, end to end: dsh is built and every scenario plays its
// script to the end, with every child found and every follow-up request
// appending to an earlier one. The figures themselves are what the
// product makes them; only their consistency is checked.
func TestCommandRunsEveryScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs dsh")
	}
	var out bytes.Buffer
	keep := t.TempDir()
	o := options{json: true, keep: keep, timeout: 2 * time.Minute, out: &out}
	var names []string
	for _, sc := range scenarios() {
		names = append(names, sc.name)
	}
	if err := o.run(names); err != nil {
		t.Fatal(err)
	}
	var results []result
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		results = append(results, r)
	}
	if len(results) != len(names)+1 || results[len(results)-1].Scenario != "total" {
		t.Fatalf("%d lines:\n%s", len(results), out.String())
	}
	var total promptcache.Report
	for i, r := range results[:len(names)] {
		if r.Scenario != names[i] || len(r.Warnings) != 0 {
			t.Errorf("%s: warnings %q", r.Scenario, r.Warnings)
		}
		if r.AppendOnly != r.Continuations || r.Continuations == 0 {
			t.Errorf("%s: append-only %d of %d", r.Scenario, r.AppendOnly, r.Continuations)
		}
		if r.Cost >= r.CostNoCache || r.HitShare <= 0 {
			t.Errorf("%s: cost %v, no cache %v, hits %v", r.Scenario, r.Cost, r.CostNoCache, r.HitShare)
		}
		for _, c := range r.Children {
			if c.First <= c.Parent || c.ParentShare <= 0 || c.ParentShare > 1 {
				t.Errorf("%s: child %+v", r.Scenario, c)
			}
		}
		bodies, _ := filepath.Glob(filepath.Join(keep, r.Scenario, "*.json"))
		if len(bodies) != r.Requests {
			t.Errorf("%s: %d kept bodies for %d requests", r.Scenario, len(bodies), r.Requests)
		}
		total = total.Add(r.Report)
	}
	if got := results[len(results)-1]; got.Requests != total.Requests || got.Cost != total.Cost {
		t.Errorf("total %+v, want %+v", got.Report, total)
	}
	// The history of the fork scenarios is as long as they say.
	for _, r := range results {
		switch r.Scenario {
		case "fork":
			if tok := r.Children[0].FirstTokens; tok < 5000 {
				t.Errorf("fork: the child's first request has %v tokens, want ≥ 5,000", tok)
			}
		case "forks":
			if tok := r.Children[0].FirstTokens; tok < 28000 || tok > 36000 {
				t.Errorf("forks: the child's first request has %v tokens, want about 30,000", tok)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(keep, "spawn", "000.json")); err != nil {
		t.Error(err)
	}
	if err := proc.NoChildren(); err != nil {
		t.Error(err)
	}
}

// A model that never answers: the scenario fails at its time limit, and
// neither `dsh run` nor `dsh acp` is left behind.
func TestHungModelFailsTheScenarioAndLeavesNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs dsh")
	}
	tmp := t.TempDir()
	o := options{timeout: time.Second, out: io.Discard}
	bin, err := o.build(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, acp := range []bool{false, true} {
		sc := &scenario{name: fmt.Sprint("hang-acp-", acp), acp: acp, prompts: []string{"[cb:hang] wait"},
			script: map[string][]scriptllm.Reply{"hang": {together(text("never"), "nobody#0")}}}
		_, err := o.scenario(tmp, bin, defaultConfig, sc)
		if err == nil {
			t.Errorf("%s: no error", sc.name)
		}
		if err := proc.NoChildren(); err != nil {
			t.Errorf("%s: %v", sc.name, err)
		}
	}
}

// Issue 28: in the shipped default configuration (continuable children,
// control tools and report mounted) a fork child's first request is at
// least 95 % a prefix of the parent request that delegated it, a spawn
// child's at least 90 %; each line names its configuration, and the
// one-shot configuration runs too.
func TestDefaultConfigurationKeepsTheParentsPrefix(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs dsh")
	}
	var out bytes.Buffer
	o := options{json: true, timeout: 2 * time.Minute, out: &out, configs: []string{defaultConfig, oneshotConfig}}
	if err := o.run([]string{"spawn", "fork"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"spawn": 0.90, "fork": 0.95}
	seen := map[string]int{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		seen[r.Config]++
		if r.Scenario == "total" {
			continue
		}
		if len(r.Children) != 1 {
			t.Fatalf("%s %s: children %+v", r.Config, r.Scenario, r.Children)
		}
		if share := r.Children[0].ParentShare; share < want[r.Scenario] {
			t.Errorf("%s %s: %.1f %% of the child's first request is a prefix of its parent's, want ≥ %.0f %%",
				r.Config, r.Scenario, 100*share, 100*want[r.Scenario])
		}
	}
	if seen[defaultConfig] != 3 || seen[oneshotConfig] != 3 {
		t.Errorf("lines per configuration: %v", seen)
	}
}
