// Command dsh is an agent harness: it runs an agent on a model with tools,
// and delegates to child agents.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/cmd/dsh/internal/earlyterm"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/internal/secret"
)

func main() {
	earlyterm.Restore()
	// The default renderer was made while $TERM was hidden: make it anew.
	lipgloss.SetDefaultRenderer(lipgloss.NewRenderer(os.Stdout))
	proc.Main() // as the supervisor of one command, dsh exits here
	// Credentials leave the environment before anything else runs; keys
	// are read through secrets.Getenv, and stderr never shows them.
	secrets, redactor, hideErr := takeCredentials(os.Args[1:])
	stderr := redactor.Writer(os.Stderr)
	// Libraries that log through slog.Default (the ACP SDK) log to dsh's
	// log file, at $DSH_LOG's level; the terminal shows errors only once,
	// as dsh says them, and stdout is never used for logs.
	level, _ := parseLevel(os.Getenv(LogEnv))
	slog.SetDefault(slog.New(redactor.Handler(slog.NewTextHandler(&logFile{getenv: secrets.Getenv}, &slog.HandlerOptions{Level: level}))))
	if hideErr != nil {
		slog.Warn("commands may be able to read credentials", "err", hideErr)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	last := new(lastWords)
	stop := watchSignals(cancel, last, stderr)
	err := newRoot(os.Stdin, os.Stdout, stderr, secrets.Getenv).ExecuteContext(withLastWords(ctx, last))
	if err != nil && wantsJSON(os.Args[1:]) {
		reportJSON(os.Stdout, err) // a bad flag or a missing prompt, found before dsh run ran
	}
	if err != nil {
		fmt.Fprintln(stderr, "dsh:", err)
	}
	code := exitCode(ctx, err)
	stop()
	cancel(nil)
	os.Exit(code)
}

// takeCredentials takes the credential variables of the configuration the
// command line names out of the environment (see secret.Take and
// config.Config.CredentialEnv; a configuration that does not load yields
// the defaults', and the command then reports why), and returns a redactor
// of every credential it knows.
func takeCredentials(args []string) (*secret.Store, *secret.Redactor, error) {
	path := ""
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			i = len(args)
		case a == "--config" && i+1 < len(args):
			path, i = args[i+1], i+1
		case strings.HasPrefix(a, "--config="):
			path = strings.TrimPrefix(a, "--config=")
		}
	}
	cfg, _ := config.Load(path, os.Getenv)
	secrets, err := secret.Take(cfg.CredentialEnv(os.Getenv))
	return secrets, secret.NewRedactor(append(secrets.Values(), cfg.Credentials(secrets.Getenv)...)...), err
}

// cli carries what every subcommand needs.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	configPath     string
	verbose        bool
	logLevel       string

	logOnce sync.Once
	log     *slog.Logger
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	c := &cli{stdin: stdin, stdout: &lockedWriter{w: stdout}, stderr: &lockedWriter{w: stderr}, getenv: getenv}
	root := &cobra.Command{
		Use:   "dsh [flags] [prompt]",
		Short: "dsh is an agent harness that delegates to child agents",
		Long: "dsh is an agent harness that delegates to child agents.\n\n" +
			"Without a command, dsh is dsh chat: an interactive session on a terminal, prompts from stdin otherwise.",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Bare dsh is dsh chat: interactive on a terminal; its arguments
		// are the first prompt.
		Args: cobra.ArbitraryArgs,
	}
	var chat chatFlags
	chat.register(root)
	root.RunE = c.rootRun(&chat)
	root.SuggestionsMinimumDistance = 2
	addVersionFlag(root)
	root.SetFlagErrorFunc(flagError)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.PersistentFlags().StringVar(&c.configPath, "config", "", "a configuration file laid over $DSH_HOME/dsh.yaml and the trusted project's .dsh/dsh.yaml (default $DSH_CONFIG; dsh config shows what is read)")
	root.PersistentFlags().BoolVarP(&c.verbose, "verbose", "v", false, "also log debug information to stderr")
	root.PersistentFlags().StringVar(&c.logLevel, "log-level", "", "level of the log file $DSH_HOME/logs/dsh.log: debug, info, warn or error (default $DSH_LOG, else warn)")
	root.AddCommand(c.runCmd(), c.demoCmd(), c.sessionsCmd(), c.acpCmd(), c.mcpCmd(), c.a2aCmd(), c.doctorCmd(), c.configCmd(), c.agentsCmd(), c.chatCmd(), c.replayCmd(), c.workerCmd(), c.trustCmd(), c.initCmd())
	return root
}

// lockedWriter serializes writes: the agent's stream and its children's
// activity are printed from different goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// loadConfig loads the configuration of the project folder dir (a
// command's --cwd; "" for the working directory: its .dsh/dsh.yaml,
// .mcp.json, Claude Code settings, definitions and instructions, when
// trusted) and prints its warnings. The result's ProjectDir is that
// folder, absolute.
func (c *cli) loadConfig(dir string) (config.Config, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return config.Config{}, err
		}
		dir = wd
	} else if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return config.Config{}, withCode(codeUsage, fmt.Errorf("--cwd %s is not a directory", dir))
	} else if dir, err = filepath.Abs(dir); err != nil {
		return config.Config{}, err
	}
	cfg, err := config.Loader{}.LoadIn(dir, c.configPath, c.getenv)
	if err == nil {
		cfg.ProjectDir = dir
		for _, w := range cfg.Warnings() {
			fmt.Fprintln(c.stderr, "dsh: warning:", w)
		}
	}
	return cfg, err
}
