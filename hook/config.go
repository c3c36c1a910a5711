// Package hook runs a user's own commands at points of an agent's life:
// before and after a tool call, when a child starts and stops, and when a
// turn ends. The configuration has Claude Code's shape (an event maps to
// matcher groups, each a list of commands), so that hooks written for
// Claude Code work unchanged. A hook gets the event as JSON on stdin; exit
// status 0 continues, exit status 2 (BlockExitCode) blocks the call with
// the hook's stderr as the reason the model reads; any other status is
// logged and the call goes on. A hook runs in its own process group with
// the scrubbed environment of child processes (internal/proc), under the
// sandbox of the commands dsh runs (Set.WithSandbox), and is killed at its
// timeout.
package hook

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Event names a point where hooks run.
type Event string

// The events.
const (
	// PreToolUse runs before a tool call, after its arguments were
	// validated; a hook can block the call.
	PreToolUse Event = "PreToolUse"
	// PostToolUse runs after a tool call ran; a blocking exit adds the
	// hook's stderr to the result the model reads.
	PostToolUse Event = "PostToolUse"
	// SubagentStart runs before a child is started; a hook can refuse the
	// delegation.
	SubagentStart Event = "SubagentStart"
	// SubagentStop runs after a child settled (observe only).
	SubagentStop Event = "SubagentStop"
	// Stop runs when a top-level agent's turn ended (observe only).
	Stop Event = "Stop"
)

// Events returns the events dsh runs hooks on, in a fixed order.
func Events() []Event { return []Event{PreToolUse, PostToolUse, SubagentStart, SubagentStop, Stop} }

// Known reports whether dsh runs hooks on e.
func (e Event) Known() bool { return slices.Contains(Events(), e) }

// blocking reports whether a hook of e can stop what it announces; a hook
// of such an event that times out blocks too.
func (e Event) blocking() bool { return e == PreToolUse || e == SubagentStart }

// CommandType is the only kind of hook: a shell command.
const CommandType = "command"

// Config maps events to their matcher groups, as written in dsh.yaml and
// in an agent definition's front matter (Claude Code's format).
type Config map[Event][]Group

// Group is a matcher and the commands it runs.
type Group struct {
	// Matcher selects the calls: for tool events a regular expression that
	// must match the whole tool name, dsh's or Claude Code's ("Bash" and
	// "bash" both match bash; the names are tool/toolname's); for subagent
	// events the subagent type. Empty
	// or "*" matches everything.
	Matcher string `json:"matcher,omitempty" yaml:"matcher,omitempty"`
	// Hooks are run in order.
	Hooks []Command `json:"hooks" yaml:"hooks"`
}

// Command is one hook.
type Command struct {
	// Type is "command" (the default).
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
	// Command is run with /bin/sh -c in the agent's working directory.
	Command string `json:"command" yaml:"command"`
	// Timeout is in seconds, as in Claude Code (default 60).
	Timeout float64 `json:"timeout,omitempty" yaml:"timeout,omitempty"`
}

// ConfigError is a bad value in a Config, at a field path such as
// "PreToolUse[0].hooks[1].command".
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Msg }

// Validate checks the events, matchers, commands and timeouts.
func (c Config) Validate() error {
	for _, ev := range sortedEvents(c) {
		if !ev.Known() {
			return &ConfigError{Field: string(ev), Msg: fmt.Sprintf("unknown hook event (want one of %s)", eventList())}
		}
		for i, g := range c[ev] {
			at := fmt.Sprintf("%s[%d]", ev, i)
			if _, err := compileMatcher(g.Matcher); err != nil {
				return &ConfigError{Field: at + ".matcher", Msg: err.Error()}
			}
			if len(g.Hooks) == 0 {
				return &ConfigError{Field: at + ".hooks", Msg: "no hook to run"}
			}
			for j, h := range g.Hooks {
				hat := fmt.Sprintf("%s.hooks[%d]", at, j)
				switch {
				case h.Type != "" && h.Type != CommandType:
					return &ConfigError{Field: hat + ".type", Msg: fmt.Sprintf("want %q, got %q", CommandType, h.Type)}
				case strings.TrimSpace(h.Command) == "":
					return &ConfigError{Field: hat + ".command", Msg: "is required"}
				case h.Timeout < 0:
					return &ConfigError{Field: hat + ".timeout", Msg: "must not be negative"}
				}
			}
		}
	}
	return nil
}

// sortedEvents returns c's events, known ones in Events order first, then
// the rest by name.
func sortedEvents(c Config) []Event {
	evs := make([]Event, 0, len(c))
	for ev := range c {
		evs = append(evs, ev)
	}
	slices.SortFunc(evs, func(a, b Event) int {
		ia, ib := slices.Index(Events(), a), slices.Index(Events(), b)
		switch {
		case ia >= 0 && ib >= 0:
			return ia - ib
		case ia >= 0:
			return -1
		case ib >= 0:
			return 1
		}
		return strings.Compare(string(a), string(b))
	})
	return evs
}

func eventList() string {
	var names []string
	for _, e := range Events() {
		names = append(names, string(e))
	}
	return strings.Join(names, ", ")
}

// compileMatcher compiles a matcher anchored at both ends; nil matches
// everything.
func compileMatcher(m string) (*regexp.Regexp, error) {
	if m == "" || m == "*" {
		return nil, nil
	}
	if _, err := regexp.Compile(m); err != nil {
		return nil, fmt.Errorf("bad regular expression %q: %v", m, err)
	}
	return regexp.Compile("^(?:" + m + ")$")
}
