package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/config"
)

// LogEnv names the variable that sets the log level (debug, info, warn,
// error) when --log-level is not given.
const LogEnv = "DSH_LOG"

// logFile is dsh's log file, $DSH_HOME/logs/dsh.log, opened (and created)
// at the first record: a command that logs nothing touches no file.
type logFile struct {
	getenv func(string) string
	once   sync.Once
	w      io.Writer
}

func (f *logFile) Write(p []byte) (int, error) {
	f.once.Do(func() {
		f.w = io.Discard
		home, err := config.Home(f.getenv)
		if err != nil {
			return
		}
		dir := filepath.Join(home, "logs")
		if os.MkdirAll(dir, 0o700) != nil {
			return
		}
		if file, err := os.OpenFile(filepath.Join(dir, "dsh.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
			f.w = file // kept open for the life of the process
		}
	})
	return f.w.Write(p)
}

// parseLevel reads a log level name; "" is warn.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if s == "" {
		return slog.LevelWarn, nil
	}
	if err := l.UnmarshalText([]byte(strings.ToLower(s))); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// logger is the commands' logger: records at the chosen level (--log-level,
// else $DSH_LOG, else warn) go to the log file, never to the terminal;
// --verbose also sends debug records to stderr.
func (c *cli) logger() *slog.Logger {
	c.logOnce.Do(func() {
		level, err := parseLevel(cmpOr(c.logLevel, c.getenv(LogEnv)))
		if err != nil {
			fmt.Fprintln(c.stderr, "dsh: warning:", err)
			level = slog.LevelWarn
		}
		var h slog.Handler = slog.NewTextHandler(&logFile{getenv: c.getenv}, &slog.HandlerOptions{Level: level})
		if c.verbose {
			h = slog.NewMultiHandler(h, slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		c.log = slog.New(h)
	})
	return c.log
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
