// Package hook runs a user's own commands at points of an agent's life:
// before and after a tool call, when a child starts and stops, when a turn
// ends, when a session starts and ends and when the user submits a prompt.
// The configuration has Claude Code's shape (an event maps to matcher
// groups, each a list of commands), and is read from Claude Code's
// settings files too (ParseSettings), so that hooks written for Claude
// Code work unchanged. A hook gets the event as JSON on stdin in Claude
// Code's shape (its tool names and argument shapes, see Input); exit
// status 0 continues, and its stdout may hold a JSON decision (Decision);
// exit status 2 (BlockExitCode) blocks the call with the hook's stderr as
// the reason the model reads; any other status is logged and the call
// goes on. A hook runs in its own process group with
// the scrubbed environment of child processes (internal/proc), under the
// sandbox of the commands dsh runs (Set.WithSandbox), and is killed at its
// timeout.
package hook

import (
	"encoding/json"
	"errors"
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
	// Stop runs when a top-level agent's turn is about to end; a hook that
	// blocks continues the turn with its reason (see Decision).
	Stop Event = "Stop"

	// SessionStart runs before a top-level agent's first turn in this
	// process; its additional context goes to the model.
	SessionStart Event = "SessionStart"
	// SessionEnd runs when a top-level agent is disposed (observe only).
	SessionEnd Event = "SessionEnd"
	// UserPromptSubmit runs before the model sees a person's prompt; a
	// hook can refuse the prompt or add context to it.
	UserPromptSubmit Event = "UserPromptSubmit"
	// Notification runs when dsh asks the user to approve a call (observe
	// only).
	Notification Event = "Notification"
	// PreCompact runs before a conversation is compacted (observe only).
	PreCompact Event = "PreCompact"
)

// Events returns the events an agent's own hooks run on, in a fixed order:
// those an agent definition may declare.
func Events() []Event { return []Event{PreToolUse, PostToolUse, SubagentStart, SubagentStop, Stop} }

// SessionEvents returns the events that only the hooks of the user's
// configuration (dsh.yaml, Claude Code's settings files) run on.
func SessionEvents() []Event {
	return []Event{SessionStart, SessionEnd, UserPromptSubmit, Notification, PreCompact}
}

// Known reports whether e is one of Events.
func (e Event) Known() bool { return slices.Contains(Events(), e) }

// Fired reports whether dsh runs hooks on e: one of Events or
// SessionEvents.
func (e Event) Fired() bool { return e.Known() || slices.Contains(SessionEvents(), e) }

// Claude reports whether e is one of Claude Code's hook events, which a
// configuration may name even when dsh does not run them.
func (e Event) Claude() bool { return slices.Contains(claudeEvents(), e) }

// claudeEvents are Claude Code's hook event names.
func claudeEvents() []Event {
	return []Event{PreToolUse, PostToolUse, "PostToolUseFailure", "PostToolBatch", "PermissionRequest", "PermissionDenied",
		Notification, UserPromptSubmit, "UserPromptExpansion", Stop, "StopFailure", SubagentStart, SubagentStop,
		PreCompact, "PostCompact", "Elicitation", "ElicitationResult", "TeammateIdle", "TaskCreated", "TaskCompleted",
		"Setup", "InstructionsLoaded", "CwdChanged", "FileChanged", "ConfigChange", "WorktreeCreate", "WorktreeRemove",
		SessionStart, SessionEnd, "PreModelSwitch", "PostModelSwitch", "MessageDisplay", "DirectoryAdded"}
}

// blocking reports whether a hook of e can stop what it announces; a hook
// of such an event that times out blocks too.
func (e Event) blocking() bool { return e == PreToolUse || e == SubagentStart }

// CommandType is the kind of hook dsh runs: a shell command. Claude
// Code's other kinds (http, prompt, agent, mcp_tool) are left out with a
// warning (see Config.Usable).
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

// Command is one hook. Decoding it (JSON or YAML) ignores the fields of
// Claude Code's hooks that dsh does not use (if, async, once,
// statusMessage, url, prompt, …), so that a block pasted from Claude
// Code's settings reads as it is.
type Command struct {
	// Type is "command" (the default).
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
	// Command is run with /bin/sh -c in the agent's working directory.
	Command string `json:"command" yaml:"command"`
	// Timeout is in seconds, as in Claude Code (default 60).
	Timeout float64 `json:"timeout,omitempty" yaml:"timeout,omitempty"`
}

// UnmarshalJSON reads a hook, ignoring the fields dsh does not use.
func (c *Command) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	return c.fromMap(m)
}

// UnmarshalYAML reads a hook, ignoring the fields dsh does not use.
func (c *Command) UnmarshalYAML(unmarshal func(any) error) error {
	var m map[string]any
	if err := unmarshal(&m); err != nil {
		return err
	}
	return c.fromMap(m)
}

func (c *Command) fromMap(m map[string]any) error {
	if m == nil {
		return errors.New("want a hook {type: command, command: …}")
	}
	var out Command
	if v, ok := m["type"]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("type: want a string, got %v", v)
		}
		out.Type = s
	}
	if v, ok := m["command"]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("command: want a string, got %v", v)
		}
		out.Command = s
	}
	if v, ok := m["timeout"]; ok && v != nil {
		n, ok := number(v)
		if !ok {
			return fmt.Errorf("timeout: want a number of seconds, got %v", v)
		}
		out.Timeout = n
	}
	*c = out
	return nil
}

// number reads a decoded JSON or YAML number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// ConfigError is a bad value in a Config, at a field path such as
// "PreToolUse[0].hooks[1].command".
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Msg }

// Validate checks the events (each one of Events), matchers, commands and
// timeouts.
func (c Config) Validate() error { return c.validate(Event.Known, Events()) }

// Usable returns what of c, a user's configuration, dsh runs (see
// NewSettings), and a warning for each part it leaves out: an event dsh
// does not run (one of Claude Code's others, or, unless strict, any other
// name) and a hook of another type than command. With strict, a name that
// is not one of Claude Code's events is an error (a typo in dsh.yaml). The
// rest is checked as Validate checks it.
func (c Config) Usable(strict bool) (Config, []string, error) {
	var warnings []string
	out := Config{}
	for _, ev := range sortedEvents(c) {
		switch {
		case ev.Fired():
		case strict && !ev.Claude():
			return nil, nil, &ConfigError{Field: string(ev), Msg: fmt.Sprintf("unknown hook event (want one of %s, or another of Claude Code's events)", eventList(fired()))}
		default:
			warnings = append(warnings, fmt.Sprintf("hooks.%s: dsh runs no %s hooks; ignored", ev, ev))
			continue
		}
		var groups []Group
		for i, g := range c[ev] {
			kept := g
			kept.Hooks = nil
			for j, h := range g.Hooks {
				if h.Type != "" && h.Type != CommandType {
					warnings = append(warnings, fmt.Sprintf("hooks.%s[%d].hooks[%d]: dsh runs only command hooks; a hook of type %s is ignored", ev, i, j, h.Type))
					continue
				}
				kept.Hooks = append(kept.Hooks, h)
			}
			if len(kept.Hooks) > 0 || len(g.Hooks) == 0 {
				groups = append(groups, kept)
			}
		}
		if len(groups) > 0 {
			out[ev] = groups
		}
	}
	if err := out.validate(Event.Fired, fired()); err != nil {
		return nil, nil, err
	}
	return out, warnings, nil
}

// fired lists Events then SessionEvents.
func fired() []Event { return slices.Concat(Events(), SessionEvents()) }

func (c Config) validate(ok func(Event) bool, want []Event) error {
	for _, ev := range sortedEvents(c) {
		if !ok(ev) {
			return &ConfigError{Field: string(ev), Msg: fmt.Sprintf("unknown hook event (want one of %s)", eventList(want))}
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
		ia, ib := slices.Index(fired(), a), slices.Index(fired(), b)
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

func eventList(evs []Event) string {
	var names []string
	for _, e := range evs {
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
