// Command dsh is an agent harness: it runs an agent on a model with tools,
// and delegates to child agents.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/internal/secret"
)

func main() {
	proc.Main() // as the supervisor of one command, dsh exits here
	// Credentials leave the environment before anything else runs; keys
	// are read through secrets.Getenv, and stderr never shows them.
	secrets, redactor, hideErr := takeCredentials(os.Args[1:])
	stderr := redactor.Writer(os.Stderr)
	// Libraries that log through slog.Default (the ACP SDK) stay quiet
	// unless something is wrong; stdout is never used for logs.
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if hideErr != nil {
		slog.Warn("commands may be able to read credentials", "err", hideErr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot(os.Stdin, os.Stdout, stderr, secrets.Getenv).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(stderr, "dsh:", err)
		os.Exit(1)
	}
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
}

func (c *cli) logger() *slog.Logger {
	level := slog.LevelWarn
	if c.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))
}

// version is the dsh version reported to peers.
const version = "0.1.0-dev"

func newRoot(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	c := &cli{stdin: stdin, stdout: &lockedWriter{w: stdout}, stderr: &lockedWriter{w: stderr}, getenv: getenv}
	root := &cobra.Command{
		Use:           "dsh",
		Short:         "dsh is an agent harness that delegates to child agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.PersistentFlags().StringVar(&c.configPath, "config", "", "configuration file (default $DSH_CONFIG, else $DSH_HOME/dsh.yaml)")
	root.PersistentFlags().BoolVarP(&c.verbose, "verbose", "v", false, "log debug information to stderr")
	root.AddCommand(c.runCmd(), c.demoCmd(), c.sessionsCmd(), c.acpCmd())
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
