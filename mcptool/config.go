package mcptool

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dsh-go/dsh/sandbox"
)

// The transports of an MCP server.
const (
	// TypeStdio runs the server as a child process speaking over its stdin
	// and stdout (the default when Command is set).
	TypeStdio = "stdio"
	// TypeHTTP reaches the server over streamable HTTP (the default when
	// URL is set).
	TypeHTTP = "http"
	// TypeSSE reaches the server over the older HTTP+SSE transport.
	TypeSSE = "sse"
)

// Default timeouts.
const (
	// DefaultStartTimeout bounds starting a server, its handshake and its
	// tool listing (ServerConfig.StartTimeout).
	DefaultStartTimeout = 30 * time.Second
)

// ServerConfig is one MCP server: a block of Claude Code's .mcp.json (type,
// command, args, env; url, headers), plus dsh's passEnv, cwd and timeouts.
// Command, args, env values, url and header values may name environment
// variables as ${VAR} or ${VAR:-default}; they are expanded when the server
// starts, so that a secret never sits in the configuration.
type ServerConfig struct {
	// Type is stdio, http (streamable HTTP) or sse; default stdio when
	// command is set, http when url is.
	Type string `yaml:"type"`
	// Command and Args start a stdio server. It runs in its own process
	// group with dsh's environment minus credentials (see internal/proc),
	// plus Env and the variables named in PassEnv.
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	PassEnv []string          `yaml:"passEnv"`
	// Cwd is a stdio server's working directory (default: the directory
	// dsh runs in, or the ACP session's); a relative one is relative to it.
	Cwd string `yaml:"cwd"`
	// URL and Headers reach an http or sse server.
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// HeadersHelper is a shell command that prints a JSON object of more
	// headers for an http or sse server, run at each connection (Claude
	// Code's headersHelper); PassEnv names the variables it gets.
	HeadersHelper string `yaml:"headersHelper"`
	// StartTimeout bounds the start, handshake and tool listing (default
	// 30s).
	StartTimeout time.Duration `yaml:"startTimeout"`
	// CallTimeout bounds each tool call (default: none; a call ends when
	// its turn is cancelled).
	CallTimeout time.Duration `yaml:"callTimeout"`
	// Sandbox is a stdio server's sandbox mode, in place of the one of the
	// commands dsh runs (Options.Sandbox): "full" lets a server that writes
	// outside its working directory (an npx one writes ~/.npm) run
	// unrestricted. Only dsh's own configuration can set it, never a
	// project's .mcp.json.
	Sandbox sandbox.Mode `yaml:"sandbox" json:"-"`
	// Literal takes every value as it is, without ${VAR} expansion (the
	// servers an ACP client passes, whose values are meant literally).
	Literal bool `yaml:"-"`
}

// Transport returns the server's transport: Type, else stdio when Command
// is set and http when URL is.
func (c ServerConfig) Transport() string {
	switch {
	case c.Type != "":
		return c.Type
	case c.URL != "" && c.Command == "":
		return TypeHTTP
	}
	return TypeStdio
}

// Describe says in a few words what the server is: "stdio: npx -y srv" or
// "http: https://…", without expanding variables.
func (c ServerConfig) Describe() string {
	if c.Transport() == TypeStdio {
		return TypeStdio + ": " + strings.Join(append([]string{c.Command}, c.Args...), " ")
	}
	return c.Transport() + ": " + c.URL
}

// ConfigError is a bad server block: Field is its key (e.g. "url"), "" for
// the block or its name.
type ConfigError struct {
	Server string
	Field  string
	Msg    string
}

func (e *ConfigError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("MCP server %q: %s", e.Server, e.Msg)
	}
	return fmt.Sprintf("MCP server %q: %s: %s", e.Server, e.Field, e.Msg)
}

// ErrorCode implements the code convention of dsh errors.
func (e *ConfigError) ErrorCode() string { return CodeConfig }

// maxServerName bounds a server's name, in bytes.
const maxServerName = 64

// ServerPrefix returns a server's name as its tools' names carry it,
// mcp__<prefix>__<tool>: the characters model APIs refuse become _, as
// Claude Code does ("GSD-2 Code" gives mcp__GSD-2_Code__…). Set gives a
// server whose prefix another server's name or prefix already is a hash
// of its name besides.
func ServerPrefix(name string) string { return unsafeName().ReplaceAllString(name, "_") }

// Validate checks the block of the server called name.
func (c ServerConfig) Validate(name string) error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Server: name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case name == "" || len(name) > maxServerName || !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl):
		return bad("", "a server name is 1 to %d bytes of text, without control characters", maxServerName)
	case strings.Contains(ServerPrefix(name), "__"):
		return bad("", `a server name must not contain "__" (nor characters that become "__" in tool names, such as two spaces), `+
			"which separates it from the tool in mcp__<server>__<tool>")
	case c.StartTimeout < 0:
		return bad("startTimeout", "must not be negative")
	case c.CallTimeout < 0:
		return bad("callTimeout", "must not be negative")
	}
	if _, err := sandbox.ParseMode(string(c.Sandbox)); err != nil {
		return bad("sandbox", "%v", err)
	}
	switch t := c.Transport(); t {
	case TypeStdio:
		switch {
		case c.Command == "":
			return bad("command", "is required for a stdio server")
		case c.URL != "" || len(c.Headers) > 0 || c.HeadersHelper != "":
			return bad("url", "a stdio server has a command, not a url, headers or a headersHelper")
		}
	case TypeHTTP, TypeSSE:
		switch {
		case c.URL == "":
			return bad("url", "is required for an %s server", t)
		case c.Command != "" || len(c.Args) > 0 || len(c.Env) > 0 || c.Cwd != "" || c.Sandbox != "":
			return bad("command", "an %s server has a url, not a command, args, env, cwd or sandbox", t)
		case len(c.PassEnv) > 0 && c.HeadersHelper == "":
			return bad("passEnv", "an %s server's passEnv is for its headersHelper, which it lacks", t)
		}
		if c.Literal || !strings.Contains(c.URL, "${") {
			if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return bad("url", "want an http:// or https:// URL, got %q", c.URL)
			}
		}
	default:
		return bad("type", "want stdio, http or sse, got %q", t)
	}
	for _, s := range c.strings() {
		if _, err := c.expand(s, func(string) (string, bool) { return "x", true }); err != nil {
			return bad("", "%v", err)
		}
	}
	return nil
}

// expand expands s unless the block is literal.
func (c ServerConfig) expand(s string, lookup func(string) (string, bool)) (string, error) {
	if c.Literal {
		return s, nil
	}
	return expand(s, lookup)
}

// strings returns every value that may name environment variables.
func (c ServerConfig) strings() []string {
	out := append([]string{c.Command, c.URL}, c.Args...)
	for _, k := range sortedKeys(c.Env) {
		out = append(out, c.Env[k])
	}
	for _, k := range sortedKeys(c.Headers) {
		out = append(out, c.Headers[k])
	}
	return out
}

// References returns the environment variables the block names in its
// command, args, env values, url and header values, with or without a
// default, in order and once each (none for a literal block).
func (c ServerConfig) References() []string {
	var names []string
	if c.Literal {
		return nil
	}
	for _, s := range c.strings() {
		substitute(s, func(name string) (string, bool) {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
			return "", true
		})
	}
	return names
}

// Missing returns the environment variables the block names, without a
// default, that lookup does not find.
func (c ServerConfig) Missing(lookup func(string) (string, bool)) []string {
	var missing []string
	if c.Literal {
		return nil
	}
	for _, s := range c.strings() {
		_, names, _ := substitute(s, lookup)
		for _, n := range names {
			if !slices.Contains(missing, n) {
				missing = append(missing, n)
			}
		}
	}
	return missing
}

// expanded returns the block with its variables expanded through lookup.
func (c ServerConfig) expanded(lookup func(string) (string, bool)) (ServerConfig, error) {
	var err error
	one := func(s string) string {
		v, e := c.expand(s, lookup)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	out := c
	out.Command, out.URL = one(c.Command), one(c.URL)
	out.Args = make([]string, len(c.Args))
	for i, a := range c.Args {
		out.Args[i] = one(a)
	}
	out.Env, out.Headers = expandMap(c.Env, one), expandMap(c.Headers, one)
	return out, err
}

func expandMap(m map[string]string, one func(string) string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		out[k] = one(m[k])
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var varName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// expand replaces ${VAR} and ${VAR:-default} in s, as Claude Code does. A
// variable lookup does not find, without a default, is an error naming it;
// so is a malformed reference.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	out, missing, err := substitute(s, lookup)
	if err == nil && len(missing) > 0 {
		err = fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, err
}

// substitute expands s and lists the variables without a default that
// lookup does not find.
func substitute(s string, lookup func(string) (string, bool)) (string, []string, error) {
	var b strings.Builder
	var missing []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), missing, nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", nil, fmt.Errorf("unterminated ${ in %q", s)
		}
		ref := s[i+2 : i+j]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !varName().MatchString(name) {
			return "", nil, fmt.Errorf("bad variable reference ${%s}", ref)
		}
		b.WriteString(s[:i])
		switch v, ok := lookup(name); {
		case ok:
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			missing = append(missing, name)
		}
		s = s[i+j+1:]
	}
}
