package config_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/config"
)

// N15: a negative or absurd cap is an error naming the key and its line,
// never "no cap".
func TestCapsOutOfRangeAreErrors(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string
	}{
		{"agent:\n  maxSteps: -5\n", "line 2: agent.maxSteps: must be between 1 and 10000, got -5"},
		{"agent:\n  maxSteps: 1000000\n", "line 2: agent.maxSteps: must be between 1 and 10000, got 1000000"},
		{"budget:\n  tokens: -1\n", "line 2: budget.tokens: must be between 1 and 1000000000"},
		{"budget:\n  tokens: 5000000000\n", "line 2: budget.tokens: must be between 1 and 1000000000"},
		{"subagents:\n  maxLiveChildren: -1\n", "line 2: subagents.maxLiveChildren: must be between 1 and 1024 (0 or unset: the default), got -1"},
		{"subagents:\n  maxLiveChildren: 100000\n", "line 2: subagents.maxLiveChildren: must be between 1 and 1024"},
		{"subagents:\n  maxChildrenPerTurn: -3\n", "line 2: subagents.maxChildrenPerTurn: must be between 1 and 1000 (0 or unset: the default), got -3"},
	} {
		_, err := config.Parse("dsh.yaml", []byte(tc.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
	for _, n := range []int{-1, 0, config.MaxSteps + 1} {
		if config.CheckMaxSteps(n) == nil {
			t.Errorf("CheckMaxSteps(%d) passed", n)
		}
	}
	if err := config.CheckMaxSteps(20); err != nil {
		t.Error(err)
	}
}

// N7: with no budget in the file, a run still has one.
func TestDefaultBudgetAndChildCaps(t *testing.T) {
	cfg, err := config.Parse("dsh.yaml", []byte("persona: x\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Budget.Tokens != config.DefaultBudgetTokens || config.DefaultBudgetTokens <= 0 {
		t.Fatalf("budget.tokens = %d, want the default %d", cfg.Budget.Tokens, config.DefaultBudgetTokens)
	}
	cfg, err = config.Parse("dsh.yaml", []byte("budget: {tokens: 300}\nsubagents: {maxChildrenPerTurn: 5, maxLiveChildren: 7}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Budget.Tokens != 300 || cfg.Subagents.MaxChildrenPerTurn != 5 || cfg.Subagents.MaxLiveChildren != 7 {
		t.Fatalf("set caps: %+v %+v", cfg.Budget, cfg.Subagents)
	}
}
