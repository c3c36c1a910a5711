package mcptool

//lint:file-ignore SA1019 MCP logging is deprecated as of protocol 2026-07-28, but the servers of today (and Claude Code) use it

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logLevel is the lowest level of the logging notifications dsh asks for.
const logLevel = "info"

// takeLogs makes the client relay the server's logging notifications.
func (s *server) takeLogs(o *mcp.ClientOptions) {
	o.LoggingMessageHandler = func(_ context.Context, req *mcp.LoggingMessageRequest) { s.set.onLog(s, req.Params) }
}

// askForLogs asks a server that logs for logLevel and above: some log only
// once asked to; one that refuses still works.
func (s *server) askForLogs(ctx context.Context, cs *mcp.ClientSession) {
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Logging == nil {
		return
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: logLevel}); err != nil {
		s.set.opts.Log.Debug("MCP server refused logging/setLevel", "server", s.name, "err", err)
	}
}

// askForCallLogs asks for logLevel in a call's meta, where protocol
// 2026-07-28 reads it; params must have its meta (a progress token).
func askForCallLogs(params *mcp.CallToolParams) { params.Meta[mcp.MetaKeyLogLevel] = logLevel }

// Log is a logging notification of an MCP server (dsh asks servers that
// log for level info and above).
type Log struct {
	Server  string
	Level   string // debug, info, notice, warning, error, critical, alert or emergency
	Logger  string // "" when the server names none
	Message string // the data: a string as it is, anything else as JSON; bounded
}

// EventType implements event.Event.
func (Log) EventType() string { return "mcp/log" }

// Bounds on a server's logging notifications.
const (
	// maxLogMessage bounds the message of a Log, in bytes.
	maxLogMessage = 4096
	// logBurst is how many notifications a server may send at once; after
	// that, dsh relays one a second and drops the rest.
	logBurst = 100
)

// logBudget spends one of a server's log notifications, refilled at one a
// second up to logBurst; false when there is none left.
func (s *server) logBudget() bool {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	now := time.Now()
	if s.logAt.IsZero() {
		s.logTokens = logBurst
	}
	s.logTokens = min(logBurst, s.logTokens+now.Sub(s.logAt).Seconds())
	s.logAt = now
	if s.logTokens < 1 {
		if s.logDropped++; s.logDropped == 1 {
			s.set.opts.Log.Warn("MCP server logs too fast; dsh relays one notification a second and drops the rest", "server", s.name)
		}
		return false
	}
	s.logTokens--
	return true
}

// onLog relays a server's logging notification to the log and the bus.
func (s *Set) onLog(srv *server, p *mcp.LoggingMessageParams) {
	if !srv.logBudget() {
		return
	}
	server := srv.name
	msg, ok := p.Data.(string)
	if !ok {
		raw, _ := json.Marshal(p.Data)
		msg = string(raw)
	}
	ev := Log{Server: server, Level: string(p.Level), Logger: cut(p.Logger, 200), Message: cut(msg, maxLogMessage)}
	level := slog.LevelError
	switch p.Level {
	case "debug":
		level = slog.LevelDebug
	case "info", "notice":
		level = slog.LevelInfo
	case "warning":
		level = slog.LevelWarn
	}
	s.opts.Log.Log(context.Background(), level, "MCP server log", "server", server, "logger", ev.Logger, "level", ev.Level, "msg", ev.Message)
	if s.opts.Events != nil {
		s.opts.Events.Emit(ev)
	}
}
