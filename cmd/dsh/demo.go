package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
)

func (c *cli) demoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Run the agent loop offline on a scripted model (no key, no network)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(c.configPath, c.getenv)
			if err != nil {
				return err
			}
			rt, err := cfg.Build(cmd.Context(), c.logger(), nil, c.getenv)
			if err != nil {
				return err
			}
			if _, err := rt.LLM.Register("offline-demo", demoModel()); err != nil {
				return err
			}
			fmt.Fprintln(c.stderr, "[offline demo: the model is scripted and no network is used; the tools and the session file are real]")
			dir, err := demoDir()
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "[working directory %s]\n", dir)
			return c.runPrompt(cmd.Context(), rt, agent.Options{Provider: "offline-demo", Model: "scripted"}, dir,
				"Write a short note to notes.txt, then tell me how big it is.")
		},
	}
}

// demoModel plays a three-step turn that uses real tools; its last answer
// quotes what the bash tool actually printed.
func demoModel() *scripted.Model {
	note, _ := json.Marshal(map[string]string{"path": "notes.txt", "content": "dsh demo: delegation through named providers.\n"})
	return scripted.New(
		scripted.ToolCalls("I'll write the note first.", scripted.Call{Name: "write_file", Arguments: string(note)}),
		scripted.ToolCalls("Now let me measure it.", scripted.Call{Name: "bash", Arguments: `{"command":"wc -c notes.txt && cat notes.txt"}`}),
		scripted.Entry{Reply: func(req *llm.Request) []content.Chunk {
			out := "(no output)"
			if last := req.Messages[len(req.Messages)-1]; len(last.Content) == 1 {
				out = strings.TrimSpace(content.JoinText(last.Content[0].Content))
			}
			return scripted.Text("Done. The bash tool reported:\n" + out + "\n").Chunks
		}},
	)
}
