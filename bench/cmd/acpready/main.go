// Command acpready measures ACP children out of process, through dsh's own
// ACP provider (subagent/acpchild), beside an in-process child, interleaved:
//
//   - dsh: `dsh acp`, built from ../cmd/dsh into a temp dir, on a loopback
//     OpenAI-compatible model server (in this process) that answers at once,
//     with a throw-away DSH_HOME and DEEPSEEK_API_KEY=x: a process per child
//     (cold);
//   - warm: the same `dsh acp` kept warm by the provider's pool (pool: {size:
//     1}): each child a session/new on the running process, disposed with
//     session/close;
//   - spawn: an in-process child (subagent/inproc) on the same loopback model;
//   - codex, codexwarm: the pinned real Codex (`codex app-server`, from
//     ../.cache/peers) through subagent/codex on a loopback Responses API
//     server, a process per child and kept warm (pool: {size: 1}; each
//     child a thread/start, ended with thread/unsubscribe);
//   - sdk: the official TypeScript ACP SDK's example agent
//     (node …/@agentclientprotocol/sdk/dist/examples/agent.js, installed by
//     ../scripts/peers.sh into ../.cache/peers). Its prompt turn sleeps about
//     5 s by design, so only its ready latency compares with dsh's.
//
// Per child: ready = Provider.Start (spawn + initialize + session/new
// answered; Start returns then; warm: session/new alone); round trip =
// Run.Wait (prompt → answer); dispose = Run.Dispose (process gone; warm:
// session closed).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/bench/internal/dshbin"
	"github.com/dsh-go/dsh/bench/internal/dshcase"
	"github.com/dsh-go/dsh/bench/internal/loopllm"
	"github.com/dsh-go/dsh/bench/internal/measure"
	"github.com/dsh-go/dsh/bench/internal/stats"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/llm/openai"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/codex"
	"github.com/dsh-go/dsh/subagent/inproc"
)

type impl struct {
	name                   string
	prov                   subagent.Provider
	ready, rtt, dispose    []float64
	prompt                 bool
	wantText, roundTripTag string
}

func main() {
	runs := flag.Int("runs", 15, "recorded children per agent (after one warm-up each)")
	sdkPrompts := flag.Int("sdk-prompts", 3, "how many of the sdk agent's children also run their ~5 s prompt (the rest are disposed once ready)")
	impls := flag.String("impls", "dsh,warm,spawn,sdk", "agents, comma separated: dsh, warm, spawn, sdk, codex, codexwarm")
	peers := flag.String("peers", "", "the peers folder (default: ../.cache/peers)")
	node := flag.String("node", "", "node binary for the sdk agent (default: ../.cache/bench-ref/node_modules/.bin/node if present, else node)")
	flag.Parse()
	slog.SetDefault(dshcase.Quiet) // the ACP connection logs through slog.Default
	if err := run(*runs, *sdkPrompts, strings.Split(*impls, ","), *node, *peers); err != nil {
		fmt.Fprintln(os.Stderr, "acpready:", err)
		os.Exit(1)
	}
}

func run(runs, sdkPrompts int, names []string, node, peers string) error {
	ctx := context.Background()
	root, err := dshbin.Root()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "dsh-acpready-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	srv := loopllm.Start("ok")
	defer srv.Close()
	if peers == "" {
		peers = filepath.Join(root, ".cache", "peers")
	}

	rt, err := dsh.New(dsh.Options{Logger: dshcase.Quiet})
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	bin := ""
	var list []*impl
	for _, n := range names {
		switch n {
		case "dsh", "warm":
			if bin == "" {
				if bin, err = dshbin.Build(tmp); err != nil {
					return err
				}
			}
			env, err := dshbin.Env(filepath.Join(tmp, "home-"+n), srv.URL)
			if err != nil {
				return err
			}
			cfg := acpchild.Config{Options: childproc.Options{Name: n, Command: bin, Args: []string{"acp"}, Env: env}, DepthEnv: "DSH_DEPTH"}
			name := "dsh acp, a process per child"
			if n == "warm" {
				one := 1
				cfg.Pool, name = &childproc.Pool{Size: &one}, "dsh acp, kept warm (pool: {size: 1})"
			}
			p, err := acpchild.New(cfg)
			if err != nil {
				return err
			}
			defer p.Close()
			list = append(list, &impl{name: name, prov: p, prompt: true, wantText: "ok", roundTripTag: "prompt round trip (loopback model answers at once)"})
		case "spawn":
			p, err := inproc.New(inproc.Config{Name: "spawn", Agents: rt.Agents})
			if err != nil {
				return err
			}
			list = append(list, &impl{name: "spawn (in process)", prov: p, prompt: true, wantText: "ok", roundTripTag: "prompt round trip (loopback model answers at once)"})
		case "codex", "codexwarm":
			p, err := codexProvider(tmp, peers, n == "codexwarm")
			if err != nil {
				return err
			}
			defer p.Close()
			name := "codex app-server, a process per child"
			if n == "codexwarm" {
				name = "codex app-server, kept warm (pool: {size: 1})"
			}
			list = append(list, &impl{name: name, prov: p, prompt: true, wantText: "ok", roundTripTag: "turn round trip (loopback Responses model answers at once)"})
		case "sdk":
			agentJS := filepath.Join(peers, "node_modules", "@agentclientprotocol", "sdk", "dist", "examples", "agent.js")
			if _, err := os.Stat(agentJS); err != nil {
				return fmt.Errorf("%s missing: run ../scripts/peers.sh first", agentJS)
			}
			if node == "" {
				node = filepath.Join(root, ".cache", "bench-ref", "node_modules", ".bin", "node")
				if _, err := os.Stat(node); err != nil {
					if node, err = exec.LookPath("node"); err != nil {
						return err
					}
				}
			}
			p, err := acpchild.New(acpchild.Config{Permission: acpchild.PermissionPolicy, Options: childproc.Options{Name: "sdk", Command: node, Args: []string{agentJS},
				// It does not exit on end of input; a short grace keeps the run bounded.
				ChildTimeouts: subagent.ChildTimeouts{EOFGrace: 200 * time.Millisecond, TermGrace: time.Second}}})
			if err != nil {
				return err
			}
			list = append(list, &impl{name: "sdk example agent", prov: p, roundTripTag: "prompt round trip (NOT comparable: the example sleeps ~5 s by design)"})
		default:
			return fmt.Errorf("unknown agent %q", n)
		}
	}
	nodeV := ""
	if node != "" {
		out, _ := exec.Command(node, "--version").Output()
		nodeV = ", node " + strings.TrimSpace(string(out))
	}
	fmt.Printf("ACP children through subagent/acpchild, %s %s/%s GOMAXPROCS=%d%s, %d runs per agent, load average %.2f\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), nodeV, runs, measure.LoadAvg())

	// The parent's route, which an in-process child inherits: the same
	// loopback model as `dsh acp`'s, over HTTP.
	model, err := openai.New(openai.Config{Provider: "x", BaseURL: srv.URL, APIKeyEnv: "X_KEY", Model: "x",
		Getenv: func(string) string { return "x" }})
	if err != nil {
		return err
	}
	if _, err := rt.LLM.Register("x", model); err != nil {
		return err
	}
	cwd := filepath.Join(tmp, "work")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		return err
	}
	parent, err := rt.Agents.Create(ctx, agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "x", Model: "x"}})
	if err != nil {
		return err
	}

	sdkPrompted := 0
	one := func(im *impl, record bool) error {
		prompt := im.prompt
		if !prompt && record && sdkPrompted < sdkPrompts {
			prompt = true
			sdkPrompted++
		}
		t0 := time.Now()
		r, err := im.prov.Start(ctx, subagent.StartRequest{Prompt: []content.Block{content.Text("say ok")}, Parent: parent, Depth: 1})
		if err != nil {
			return fmt.Errorf("%s: start: %w", im.name, err)
		}
		ready := time.Since(t0)
		var rtt time.Duration
		if prompt {
			t1 := time.Now()
			res, err := r.Wait(ctx)
			rtt = time.Since(t1)
			if err == nil && res.StopReason != subagent.Completed {
				err = fmt.Errorf("stopped %s (%s)", res.StopReason, res.Diagnostic)
			}
			if err == nil && im.wantText != "" && strings.TrimSpace(content.JoinText(res.Output)) != im.wantText {
				err = fmt.Errorf("answered %q, want %q", content.JoinText(res.Output), im.wantText)
			}
			if err != nil {
				_ = r.Dispose(ctx)
				return fmt.Errorf("%s: %w", im.name, err)
			}
		}
		t2 := time.Now()
		if err := r.Dispose(ctx); err != nil {
			return fmt.Errorf("%s: dispose: %w", im.name, err)
		}
		if record {
			im.ready = append(im.ready, float64(ready.Microseconds())/1e3)
			im.dispose = append(im.dispose, float64(time.Since(t2).Microseconds())/1e3)
			if prompt {
				im.rtt = append(im.rtt, float64(rtt.Microseconds())/1e3)
			}
		}
		return nil
	}
	for _, im := range list { // warm-up: file cache, first exec
		if err := one(im, false); err != nil {
			return err
		}
	}
	for i := range runs {
		for j := range list {
			im := list[(i+j)%len(list)]
			if err := one(im, true); err != nil {
				return err
			}
		}
	}
	fmt.Println()
	for _, im := range list {
		r, d := stats.Of(im.ready), stats.Of(im.dispose)
		fmt.Printf("## %s\n  ready (Start returned): median %.2f ms, p90 %.2f, min %.2f ms\n", im.name, r.Median, r.P90, r.Min)
		if len(im.rtt) > 0 {
			t := stats.Of(im.rtt)
			fmt.Printf("  %s: median %.2f ms, p90 %.2f ms (%d runs)\n", im.roundTripTag, t.Median, t.P90, t.N)
		}
		fmt.Printf("  dispose: median %.2f ms\n", d.Median)
	}
	if rss := childrenRSS(); len(rss) > 0 {
		fmt.Println()
		for _, comm := range slices.Sorted(maps.Keys(rss)) {
			fmt.Printf("resident memory of the warm %s processes left idle: %.1f MiB\n", comm, float64(rss[comm])/(1<<20))
		}
	}
	if len(list) >= 2 {
		fmt.Println()
		for _, im := range list[1:] {
			a, b := stats.Median(list[0].ready), stats.Median(im.ready)
			fmt.Printf("ready, %s / %s: %.2f×\n", im.name, list[0].name, b/a)
		}
	}
	if n := srv.Requests.Load(); n == 0 && slices.ContainsFunc(names, func(n string) bool { return n == "dsh" || n == "warm" || n == "spawn" }) {
		return fmt.Errorf("the loopback model got no request")
	}
	return nil
}

// childrenRSS sums the resident memory of this process's children and
// their descendants by program name (Linux; none elsewhere).
func childrenRSS() map[string]int64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after the last ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	total := map[string]int64{}
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p != os.Getpid() {
				continue
			}
			comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
			b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
			for line := range strings.Lines(string(b)) {
				if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
					n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 10, 64)
					total[strings.TrimSpace(string(comm))] += n << 10
				}
			}
			break
		}
	}
	return total
}

// codexProvider is the pinned real Codex against a loopback Responses
// server (started here, stopped with the process), offline and keyless,
// with a CODEX_HOME of its own under tmp.
func codexProvider(tmp, peers string, warm bool) (*codex.Provider, error) {
	bin := filepath.Join(peers, "node_modules", "@openai", "codex-linux-x64", "vendor", "x86_64-unknown-linux-musl", "bin", "codex")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s missing: run ../scripts/peers.sh first", bin)
	}
	srv := loopllm.StartResponses("ok")
	home, err := os.MkdirTemp(tmp, "codex-home-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(llmtest.CodexConfig(srv.URL)), 0o600); err != nil {
		return nil, err
	}
	cfg := codex.Config{CodexHome: home, Options: childproc.Options{Name: "codex", Command: bin,
		Env: map[string]string{"HOME": home, "MOCK_API_KEY": "fake", "NO_PROXY": "127.0.0.1"}}}
	if warm {
		one := 1
		cfg.Pool = &childproc.Pool{Size: &one}
	}
	return codex.New(cfg)
}
