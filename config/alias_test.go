package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/config"
)

// aliasBomb is a dsh.yaml whose MCP server's args are levels of nine
// aliases of the level before: a few hundred bytes, 9^levels strings once
// a decoder expands them.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("mcpServers:\n  x:\n    command: echo\n    args:\n    - &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "    - &a%d [%s]\n", i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 9), ","))
	}
	return b.String()
}

// A dsh.yaml whose aliases expand past the bound is refused in
// milliseconds, with the file and the line of the alias (N10); on the
// decoder alone seven levels took seconds, and each more level 9× longer.
func TestParseRefusesAnAliasBomb(t *testing.T) {
	for _, levels := range []int{7, 12} {
		doc := aliasBomb(levels)
		start := time.Now()
		_, err := config.Parse("/home/u/.dsh/dsh.yaml", []byte(doc), env(nil))
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "config /home/u/.dsh/dsh.yaml: line 9: YAML aliases expand to more than 10000 nodes") {
			t.Fatalf("%d levels (%d bytes): Parse = %v", levels, len(doc), err)
		}
		if took > 500*time.Millisecond {
			t.Errorf("%d levels (%d bytes): refused after %v", levels, len(doc), took)
		}
	}
	// Through Load too, as every dsh command reads the file.
	home := t.TempDir()
	path := filepath.Join(home, "dsh.yaml")
	if err := os.WriteFile(path, []byte(aliasBomb(9)), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := config.Load(path, env(map[string]string{"DSH_HOME": home})); err == nil || !strings.Contains(err.Error(), path+": line 9:") {
		t.Fatalf("Load = %v", err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Load refused after %v", took)
	}
}

// Aliases that reuse a block, as configurations do, are still read.
func TestParseKeepsAliasReuse(t *testing.T) {
	cfg, err := config.Parse("dsh.yaml", []byte(`models:
  - {name: fast, baseURL: &url "http://h/v1", apiKeyEnv: &key K, model: m1}
  - {name: slow, baseURL: *url, apiKeyEnv: *key, model: m2}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	slow := cfg.Models[len(cfg.Models)-1]
	if slow.Name != "slow" || slow.BaseURL != "http://h/v1" || slow.APIKeyEnv != "K" || slow.Model != "m2" {
		t.Fatalf("models %+v", cfg.Models)
	}
}

// FuzzParse reads any bytes as a dsh.yaml: Parse never panics, ends
// quickly whatever the aliases, and every error names the file.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"agent: {provider: deepseek, model: deepseek-flash}\n",
		"models:\n  - {name: a, baseURL: &u http://h, apiKeyEnv: K, model: m}\n  - {name: b, baseURL: *u, apiKeyEnv: K, model: m}\n",
		"tools: {sandbox: read-only, bashTimeout: 30s}\npermissions: {default: ask, allow: [read_file]}\n",
		"subagents:\n  providers:\n    - name: c\n      kind: acp\n      acp: {command: self}\n",
		"hooks:\n  PreToolUse:\n    - matcher: bash\n      hooks: [{type: command, command: 'exit 0'}]\n",
		"mcpServers:\n  x: {command: echo, args: [&a x, *a]}\n",
		aliasBomb(3),
		"a: &a [*a]\n",
		"{",
		"- 1\n- 2\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		_, err := config.Parse("fuzz.yaml", data, env(nil))
		if err != nil && !strings.HasPrefix(err.Error(), "config fuzz.yaml: ") {
			t.Fatalf("error without the file's name: %v", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("Parse took %v on %q", took, data)
		}
	})
}
