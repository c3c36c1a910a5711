// Command dsh is an agent harness: it runs an agent on a model with tools,
// and delegates to child agents.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/config"
)

func main() {
	// Libraries that log through slog.Default (the ACP SDK) stay quiet
	// unless something is wrong; stdout is never used for logs.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, cancel := context.WithCancelCause(context.Background())
	last := new(lastWords)
	stop := watchSignals(cancel, last, os.Stderr)
	err := newRoot(os.Stdin, os.Stdout, os.Stderr, os.Getenv).ExecuteContext(withLastWords(ctx, last))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dsh:", err)
	}
	code := exitCode(ctx, err)
	stop()
	cancel(nil)
	os.Exit(code)
}

// cli carries what every subcommand needs.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	configPath     string
	verbose        bool
}

func (c *cli) logger() *slog.Logger {
	level := slog.LevelWarn
	if c.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	c := &cli{stdin: stdin, stdout: &lockedWriter{w: stdout}, stderr: &lockedWriter{w: stderr}, getenv: getenv}
	root := &cobra.Command{
		Use:           "dsh",
		Short:         "dsh is an agent harness that delegates to child agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	addVersionFlag(root)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.PersistentFlags().StringVar(&c.configPath, "config", "", "configuration file (default $DSH_CONFIG, else $DSH_HOME/dsh.yaml)")
	root.PersistentFlags().BoolVarP(&c.verbose, "verbose", "v", false, "log debug information to stderr")
	root.AddCommand(c.runCmd(), c.demoCmd(), c.sessionsCmd(), c.acpCmd(), c.doctorCmd(), c.replayCmd())
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

// loadConfig loads the configuration file and prints its warnings.
func (c *cli) loadConfig() (config.Config, error) {
	cfg, err := config.Load(c.configPath, c.getenv)
	if err == nil {
		for _, w := range cfg.Warnings() {
			fmt.Fprintln(c.stderr, "dsh: warning:", w)
		}
	}
	return cfg, err
}
