package main

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
)

// The demo's two user turns.
const (
	demoTurn1 = "Write a short note about dsh to notes.txt."
	demoTurn2 = "Now have subagents check it: one measures the file, one recaps what I asked for."
)

func (c *cli) demoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Run the agent loop and subagent delegation offline on a scripted model (no key, no network)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := c.loadConfig("")
			if err != nil {
				return err
			}
			cfg.Subagents = config.DefaultSubagents()
			rt, err := cfg.Build(cmd.Context(), c.logger(), nil, c.getenv)
			if err != nil {
				return err
			}
			if _, err := rt.LLM.Register("offline-demo", llm.ModelFunc(demoModel)); err != nil {
				return err
			}
			fmt.Fprintln(c.stderr, "[offline demo: the model is scripted and no network is used; the tools, subagents and session files are real]")
			dir, err := demoDir()
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "[working directory %s]\n", dir)
			return c.runTurns(cmd.Context(), rt, runSpec{root: agent.CreateOptions{Cwd: dir, Options: agent.Options{Provider: "offline-demo", Model: "scripted"}}, echo: true},
				slices.Values([]string{demoTurn1, demoTurn2}))
		},
	}
}

// lastTask returns the text of the last user-authored message, a child's
// instructions left out, and whether it is a child's task.
func lastTask(req *llm.Request) (task string, child bool) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Source.Kind == content.SourceUser {
			_, task, child = prompt.SplitChildTask(content.JoinText(m.Content))
			return task, child
		}
	}
	return "", false
}

func isChild(req *llm.Request) bool {
	_, child := lastTask(req)
	return child
}

// demoModel decides each answer from the request alone, so that parallel
// children are answered correctly in any order.
func demoModel(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	var e scripted.Entry
	if isChild(req) {
		e = demoChild(req)
	} else {
		e = demoParent(req)
	}
	return scripted.New(e).Stream(ctx, req)
}

func demoParent(req *llm.Request) scripted.Entry {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case content.JoinText(last.Content) == demoTurn1:
		note, _ := json.Marshal(map[string]string{"path": "notes.txt",
			"content": "dsh delegates tasks to child agents through named providers.\n"})
		return scripted.ToolCalls("I'll write the note.", scripted.Call{Name: "write_file", Arguments: string(note)})
	case content.JoinText(last.Content) == demoTurn2:
		return scripted.ToolCalls("I'll ask a fresh subagent to measure the file and a forked one, which sees our conversation, to recap.",
			scripted.Call{Name: "subagent", Arguments: `{"description":"measure the note","prompt":"Run wc -c notes.txt in the working directory and report the byte count."}`},
			scripted.Call{Name: "subagent_fork", Arguments: `{"description":"recap the request","prompt":"In one sentence: what did the user ask for before this turn?"}`})
	}
	results := toolResults(req.Messages)
	if len(results) == 1 {
		return scripted.Text("Written: notes.txt holds a one-line note.")
	}
	return scripted.Text(fmt.Sprintf("Both subagents reported back.\n- measure: %s\n- recap: %s", results[len(results)-2], results[len(results)-1]))
}

func demoChild(req *llm.Request) scripted.Entry {
	prompt, _ := lastTask(req)
	if strings.HasPrefix(prompt, "Run wc") {
		if results := toolResults(req.Messages); len(results) > 0 {
			return scripted.Text("notes.txt: " + results[len(results)-1] + " (wc -c output)")
		}
		return scripted.ToolCalls("", scripted.Call{Name: "bash", Arguments: `{"command":"wc -c notes.txt"}`})
	}
	// The forked child sees the parent's completed turn: its first message.
	return scripted.Text("You asked: \"" + content.JoinText(req.Messages[0].Content) + "\"")
}

// toolResults returns the text of every tool result in messages, trimmed,
// without the line naming a continuable child.
func toolResults(msgs []content.Message) []string {
	var out []string
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == content.TypeToolResult {
				text := strings.TrimSpace(content.JoinText(b.Content))
				if id, rest, ok := strings.Cut(text, "\n"); ok && strings.HasPrefix(id, "[subagent ") {
					text = rest
				}
				out = append(out, text)
			}
		}
	}
	return out
}
