package agentdef

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	yamlparser "github.com/goccy/go-yaml/parser"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/internal/yamlalias"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/toolname"
)

// fields are the front-matter keys dsh reads; maxTurns is Claude Code's
// name for maxSteps.
func fields() []string {
	return []string{"name", "description", "tools", "disallowedTools", "model", "provider", "maxSteps", "maxTurns",
		"outputSchema", "background", "isolation", "permissions", "permissionMode", "hooks"}
}

// claudeOnly are Claude Code fields dsh has no use for: a warning each.
func claudeOnly(key string) bool {
	return slices.Contains([]string{"color", "skills", "mcpServers", "memory", "effort", "initialPrompt"}, key)
}

// baseModel is a model name without Claude Code's context suffix
// ("sonnet" for "sonnet[1m]").
func baseModel(m string) string {
	if i := strings.IndexByte(m, '['); i > 0 && strings.HasSuffix(m, "]") {
		return m[:i]
	}
	return m
}

// withClaudeNames adds Claude Code's names of the built-in tools to names.
func withClaudeNames(names []string) []string {
	out := slices.Clone(names)
	for _, n := range names {
		if c := toolname.Claude(n); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// readOnlyRules is permissionMode "plan": nothing that changes files or
// runs commands.
func readOnlyRules() permission.Rules {
	return permission.Rules{Tools: map[string]permission.Decision{"bash": permission.Deny, "write_file": permission.Deny, "edit_file": permission.Deny}}
}

// position is a parser message's reference to a front-matter position.
var position = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`at \[(\d+):\d+\]`) })

// validName is a definition's name: as in Claude Code, words with spaces
// ("Code Reviewer") are names too.
var validName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[\p{L}\p{N}][\p{L}\p{N} _.:-]{0,127}$`)
})

// fileParser reads one definition file.
type fileParser struct {
	opts     *Options
	def      *Definition
	doc      *ast.File // the front matter
	offset   int       // file lines before the front matter
	warnings []string
}

// parse reads the definition in data, read from src.Path.
func parse(src Source, data []byte, opts *Options) (*Definition, []string, error) {
	p := &fileParser{opts: opts, def: &Definition{Source: src, lines: map[string]int{}}, offset: 1}
	front, body, err := split(string(data))
	if err != nil {
		return nil, nil, &Error{Path: src.Path, Line: 1, Msg: err.Error()}
	}
	if err := p.front(front); err != nil {
		return nil, nil, err
	}
	p.def.Instructions = strings.TrimSpace(body)
	return p.def, p.warnings, nil
}

// split cuts a file into its front matter and its body. As in Claude
// Code, a fence line may end in spaces or tabs.
func split(text string) (front, body string, err error) {
	text = strings.ReplaceAll(strings.TrimPrefix(text, "\ufeff"), "\r\n", "\n")
	first, rest, _ := strings.Cut(text, "\n")
	if !isFence(first) {
		return "", "", errors.New("no front matter: a definition starts with a line \"---\", then YAML, then another \"---\" line, then the instructions")
	}
	for i := 0; i <= len(rest); {
		line, _, _ := strings.Cut(rest[i:], "\n")
		if isFence(line) {
			end := min(i+len(line)+1, len(rest))
			return rest[:i], rest[end:], nil
		}
		i += len(line) + 1
	}
	return "", "", errors.New("the front matter does not end: add a line \"---\" after it")
}

func isFence(line string) bool { return strings.TrimRight(line, " \t") == "---" }

func (p *fileParser) fail(line int, field, format string, args ...any) error {
	return &Error{Path: p.def.Source.Path, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (p *fileParser) warn(line int, field, format string, args ...any) {
	p.warnings = append(p.warnings, (&Error{Path: p.def.Source.Path, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}).Error())
}

// front reads the front matter's keys.
func (p *fileParser) front(text string) error {
	doc, err := yamlparser.ParseBytes([]byte(text), 0)
	if err != nil {
		if lenient, ok := quotePlain(text); ok {
			if d, lerr := yamlparser.ParseBytes([]byte(lenient), 0); lerr == nil {
				doc, err = d, nil
			}
		}
	}
	if err != nil {
		var ye yaml.Error
		if errors.As(err, &ye) {
			msg := position().ReplaceAllStringFunc(ye.GetMessage(), func(m string) string {
				n, _ := strconv.Atoi(position().FindStringSubmatch(m)[1])
				return fmt.Sprintf("at line %d", n+p.offset)
			})
			return p.fail(ye.GetToken().Position.Line+p.offset, "", "%s", msg)
		}
		return p.fail(0, "", "%v", err)
	}
	var bomb *yamlalias.Error
	if errors.As(yamlalias.Check(doc, yamlalias.MaxNodes), &bomb) {
		return p.fail(bomb.Line+p.offset, "", "%s", bomb.Message())
	}
	p.doc = doc
	var entries []*ast.MappingValueNode
	if len(doc.Docs) == 1 {
		switch b := doc.Docs[0].Body.(type) {
		case *ast.MappingNode:
			entries = b.Values
		case *ast.MappingValueNode:
			entries = []*ast.MappingValueNode{b}
		case nil:
		default:
			return p.fail(b.GetToken().Position.Line+p.offset, "", "the front matter must be a mapping of keys such as name and description")
		}
	} else if len(doc.Docs) > 1 {
		return p.fail(0, "", "the front matter holds more than one YAML document")
	}
	for _, mv := range entries {
		key := mv.Key.GetToken().Value
		line := mv.Key.GetToken().Position.Line + p.offset
		p.def.lines[key] = line
		if err := p.field(key, line, mv.Value); err != nil {
			return err
		}
	}
	d := p.def
	switch {
	case d.Name == "":
		return p.fail(1, "name", "is required")
	case !validName().MatchString(d.Name):
		return p.fail(d.lines["name"], "name", "want letters, digits, '-', '_' or '.', got %q", d.Name)
	case strings.TrimSpace(d.Description) == "":
		return p.fail(max(d.lines["description"], 1), "description", "is required: it tells the model when to use this agent")
	case d.lines["maxSteps"] > 0 && d.lines["maxTurns"] > 0:
		return p.fail(d.lines["maxTurns"], "maxTurns", "maxSteps is set too: keep one")
	}
	return nil
}

// plainKey is a top-level key with a plain (unquoted) scalar value.
var plainKey = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*):[ \t]+([^ \t"'\[{|>&*!%@#].*)$`)
})

// quotePlain reads front matter as Claude Code does when it is not valid
// YAML: a top-level key's unquoted value that holds ": " ("description:
// Use for X. Triggers on: a, b") is text, with its indented continuation
// lines folded in as YAML folds a plain scalar. It returns the front
// matter with such values double-quoted (line numbers unchanged), and
// whether it changed anything.
func quotePlain(text string) (string, bool) {
	lines := strings.Split(text, "\n")
	changed := false
	for i := 0; i < len(lines); i++ {
		m := plainKey().FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		value := strings.TrimRight(m[2], " \t")
		if !strings.Contains(value, ": ") && !strings.HasSuffix(value, ":") {
			continue
		}
		j := i + 1
		for ; j < len(lines) && (lines[j] == "" || lines[j][0] == ' ' || lines[j][0] == '\t'); j++ {
			if t := strings.TrimSpace(lines[j]); t == "" {
				value += "\n"
			} else if strings.HasSuffix(value, "\n") {
				value += t
			} else {
				value += " " + t
			}
			lines[j] = ""
		}
		quoted, _ := json.Marshal(strings.TrimRight(value, "\n"))
		lines[i] = m[1] + ": " + string(quoted)
		changed = true
		i = j - 1
	}
	return strings.Join(lines, "\n"), changed
}

// field reads one front-matter key.
func (p *fileParser) field(key string, line int, node ast.Node) error {
	d := p.def
	var err error
	switch key {
	case "name":
		d.Name, err = p.str(key, line, node)
	case "description":
		d.Description, err = p.str(key, line, node)
	case "tools":
		d.Tools, err = p.tools(key, line, node)
	case "disallowedTools":
		d.DisallowedTools, err = p.tools(key, line, node)
	case "model":
		err = p.model(line, node)
	case "provider":
		err = p.provider(line, node)
	case "maxSteps", "maxTurns":
		if err = p.decode(key, line, node, &d.MaxSteps, "an integer"); err == nil && d.MaxSteps <= 0 {
			err = p.fail(line, key, "want a positive integer, got %d", d.MaxSteps)
		}
	case "outputSchema":
		d.OutputSchema, err = p.schema(line, node)
	case "background":
		err = p.decode(key, line, node, &d.Background, "true or false")
	case "isolation":
		if d.Isolation, err = p.str(key, line, node); err == nil && d.Isolation != "" && d.Isolation != IsolationWorktree {
			err = p.fail(line, key, "want %q, got %q", IsolationWorktree, d.Isolation)
		}
	case "permissions":
		err = p.permissions(line, node)
	case "permissionMode":
		err = p.permissionMode(line, node)
	case "hooks":
		err = p.hooks(line, node)
	default:
		switch {
		case claudeOnly(key):
			p.warn(line, key, "a Claude Code field dsh does not use; ignored")
		case d.Source.Claude:
			p.warn(line, key, "unknown field; ignored")
		default:
			msg := "unknown field"
			if near := tool.Suggest(fields(), key); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			p.warn(line, key, "%s; ignored (known fields: %s)", msg, strings.Join(fields(), ", "))
		}
	}
	return err
}

// decode reads node into v, saying what was wanted when it does not fit.
func (p *fileParser) decode(key string, line int, node ast.Node, v any, want string) error {
	if err := yaml.NodeToValue(node, v); err != nil {
		return p.fail(line, key, "want %s, got %s", want, shown(node))
	}
	return nil
}

// shown is a node's YAML for a message: its first line, clipped.
func shown(node ast.Node) string {
	s, _, more := strings.Cut(strings.TrimSpace(node.String()), "\n")
	if len(s) > 60 {
		s, more = s[:60], true
	}
	if more {
		s += " …"
	}
	return s
}

func (p *fileParser) str(key string, line int, node ast.Node) (string, error) {
	switch node.(type) {
	case *ast.StringNode, *ast.LiteralNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		var s string
		err := p.decode(key, line, node, &s, "a string")
		return strings.TrimSpace(s), err
	case *ast.NullNode:
		return "", nil
	}
	return "", p.fail(line, key, "want a string, got %s", shown(node))
}

// tools reads a tool list: a comma-separated string or a list, in dsh's
// names or Claude Code's. "*" alone is every tool (nil). A name dsh has no
// tool for is a warning, and left out.
func (p *fileParser) tools(key string, line int, node ast.Node) ([]string, error) {
	var names []string
	switch node.(type) {
	case *ast.SequenceNode:
		if err := p.decode(key, line, node, &names, "a list of tool names"); err != nil {
			return nil, err
		}
	case *ast.NullNode:
		return nil, nil
	default:
		s, err := p.str(key, line, node)
		if err != nil {
			return nil, err
		}
		names = splitTools(s)
	}
	if len(names) == 1 && strings.TrimSpace(names[0]) == "*" {
		if key == "tools" {
			return nil, nil
		}
		p.warn(line, key, "\"*\" would hide every tool; ignored")
		return nil, nil
	}
	out := []string{}
	for _, n := range names {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		for _, t := range p.tool(key, line, n) {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// splitTools splits a comma-separated tool list, keeping the commas inside
// parentheses: "Agent(worker, researcher), Read" is two names.
func splitTools(s string) []string {
	var names []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		case ',':
			if depth == 0 {
				names = append(names, s[start:i])
				start = i + 1
			}
		}
	}
	return append(names, s[start:])
}

// tool maps one name of a tool list to dsh's tools (none, with a warning,
// when dsh has no such tool).
func (p *fileParser) tool(key string, line int, name string) []string {
	if slices.Contains(p.opts.Tools, name) {
		return []string{name}
	}
	if server, rest, ok := strings.Cut(strings.TrimPrefix(name, mcptool.Prefix), "__"); strings.HasPrefix(name, mcptool.Prefix) {
		if !slices.Contains(p.opts.MCPServers, server) {
			p.warn(line, key, "%s: no MCP server %q is configured; left out", name, server)
			return nil
		}
		if !ok || rest == "" || rest == "*" {
			return []string{mcptool.Prefix + server + "__*"} // every tool of the server
		}
		return []string{name}
	}
	base, args, hasArgs := strings.Cut(name, "(")
	base = strings.TrimSpace(base)
	dsh, ok, known := toolname.Counterpart(base)
	switch {
	case ok && !slices.Contains(p.opts.Tools, dsh):
		p.warn(line, key, "%s is dsh's %s, which this configuration does not have; left out", name, dsh)
		return nil
	case ok && hasArgs && key == "disallowedTools":
		p.warn(line, key, "%s: dsh hides tools whole, not per argument; all of %s is hidden", name, dsh)
	case ok && hasArgs && dsh == toolname.Bash:
		p.warn(line, key, "%s: dsh's permissions are per tool, not per command; the child gets %s without the limit (%s",
			name, dsh, strings.TrimSpace(args))
	case ok && hasArgs:
		p.warn(line, key, "%s: dsh cannot narrow %s to (%s; the child gets all of it", name, dsh, strings.TrimSpace(args))
	case ok:
	case known:
		p.warn(line, key, "%s is a Claude Code tool dsh does not have; left out", name)
		return nil
	default:
		msg := fmt.Sprintf("unknown tool %q", name)
		if near := tool.Suggest(withClaudeNames(p.opts.Tools), name); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		p.warn(line, key, "%s; left out (known tools: %s)", msg, strings.Join(p.opts.Tools, ", "))
		return nil
	}
	return []string{dsh}
}

// model resolves a definition's model to a route: the route of that name,
// in any case and without a context suffix ("Sonnet[1m]" is the route
// sonnet), else the route serving that model id; inherit and default keep
// the parent's. Any other name keeps the parent's too, and is counted in
// the one warning of the load (see modelWarning), not one per file.
func (p *fileParser) model(line int, node ast.Node) error {
	m, err := p.str("model", line, node)
	if err != nil {
		return err
	}
	if m == "" || strings.EqualFold(m, ModelInherit) || strings.EqualFold(m, "default") {
		return nil
	}
	for _, want := range []string{m, baseModel(m)} {
		for _, r := range p.opts.Routes {
			if strings.EqualFold(r, want) {
				p.def.Model = r
				return nil
			}
		}
	}
	for _, r := range p.opts.Routes {
		if id := p.opts.RouteModels[r]; id != "" && strings.EqualFold(id, m) {
			p.def.Model = r
			return nil
		}
	}
	p.def.askedModel = m
	return nil
}

func (p *fileParser) provider(line int, node ast.Node) error {
	name, err := p.str("provider", line, node)
	if err != nil || name == "" {
		return err
	}
	if _, ok := p.opts.Providers[name]; !ok {
		return p.fail(line, "provider", "%q is not a registered subagent provider (registered: %s)", name,
			strings.Join(slices.Sorted(maps.Keys(p.opts.Providers)), ", "))
	}
	p.def.Provider = name
	return nil
}

// schema reads an output schema: a mapping, or the path of a JSON or YAML
// file relative to the definition.
func (p *fileParser) schema(line int, node ast.Node) (*jsonschema.Schema, error) {
	var raw []byte
	if _, isMap := node.(*ast.MappingNode); isMap {
		var v map[string]any
		if err := p.decode("outputSchema", line, node, &v, "a JSON Schema mapping or the path of a schema file"); err != nil {
			return nil, err
		}
		raw, _ = json.Marshal(v)
	} else {
		path, err := p.str("outputSchema", line, node)
		if err != nil || path == "" {
			return nil, err
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(p.def.Source.Path), path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, p.fail(line, "outputSchema", "%v", err)
		}
		if file, err := yamlparser.ParseBytes(data, 0); err == nil {
			if err := yamlalias.Check(file, yamlalias.MaxNodes); err != nil {
				return nil, p.fail(line, "outputSchema", "%s: %v", path, err)
			}
		}
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return nil, p.fail(line, "outputSchema", "%s: not JSON or YAML: %v", path, err)
		}
		raw, _ = json.Marshal(v)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, p.fail(line, "outputSchema", "not a JSON Schema: %v", err)
	}
	if err := subagent.CheckSchema(&s); err != nil {
		return nil, p.fail(line, "outputSchema", "%v", err)
	}
	return &s, nil
}

func (p *fileParser) permissions(line int, node ast.Node) error {
	var r permission.Rules
	if err := yaml.NodeToValue(node, &r, yaml.Strict()); err != nil {
		return p.fail(line, "permissions", "want {default: allow|ask|deny, tools: {NAME: allow|ask|deny}}: %s", yamlMessage(err))
	}
	if err := r.Validate(); err != nil {
		return p.fail(line, "permissions", "%v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Tools)) {
		if !permission.IsPattern(name) && !slices.Contains(p.opts.Tools, name) {
			return p.fail(p.lineOf("permissions.tools."+name, line), "permissions", "unknown tool %q", name)
		}
	}
	p.narrow(r)
	return nil
}

// permissionMode maps Claude Code's permission modes: plan is read-only;
// default changes nothing; the others would widen the parent's policy,
// which a child cannot, so they are ignored with a warning.
func (p *fileParser) permissionMode(line int, node ast.Node) error {
	mode, err := p.str("permissionMode", line, node)
	switch {
	case err != nil:
		return err
	case mode == "" || mode == "default":
	case mode == "plan":
		p.narrow(readOnlyRules())
	case mode == "acceptEdits" || mode == "dontAsk" || mode == "bypassPermissions" || mode == "auto":
		p.warn(line, "permissionMode", "%s would widen the parent's permission policy, which a child cannot do; ignored", mode)
	case p.def.Source.Claude:
		p.warn(line, "permissionMode", "unknown mode %q; ignored", mode)
	default:
		return p.fail(line, "permissionMode", "want default or plan, got %q", mode)
	}
	return nil
}

func (p *fileParser) narrow(r permission.Rules) {
	pol := permission.Policy{}
	if p.def.Policy != nil {
		pol = *p.def.Policy
	}
	pol = pol.Narrow(r)
	if !pol.Unrestricted() {
		p.def.Policy = &pol
	}
}

// hooks reads Claude Code's hooks format. As in Claude Code, a Stop hook
// of a definition runs when the child stops (SubagentStop).
func (p *fileParser) hooks(line int, node ast.Node) error {
	var cfg hook.Config
	var strict []yaml.DecodeOption
	if !p.def.Source.Claude { // Claude Code's hooks have fields dsh does not use (url, prompt, once, async, …)
		strict = append(strict, yaml.Strict())
	}
	if err := yaml.NodeToValue(node, &cfg, strict...); err != nil {
		return p.fail(line, "hooks", "want {EVENT: [{matcher: …, hooks: [{type: command, command: …}]}]}: %s", yamlMessage(err))
	}
	for _, ev := range slices.Sorted(maps.Keys(cfg)) {
		if !ev.Known() && p.def.Source.Claude {
			p.warn(p.lineOf("hooks."+string(ev), line), "hooks", "dsh runs no %s hooks; ignored", ev)
			delete(cfg, ev)
		}
	}
	for ev, groups := range cfg {
		for i := range groups {
			groups[i].Hooks = slices.DeleteFunc(groups[i].Hooks, func(c hook.Command) bool {
				drop := p.def.Source.Claude && c.Type != "" && c.Type != hook.CommandType
				if drop {
					p.warn(p.lineOf(fmt.Sprintf("hooks.%s[%d]", ev, i), line), "hooks", "dsh runs only command hooks; a %s hook is ignored", c.Type)
				}
				return drop
			})
		}
		cfg[ev] = slices.DeleteFunc(groups, func(g hook.Group) bool { return len(g.Hooks) == 0 && p.def.Source.Claude })
	}
	if stop, ok := cfg[hook.Stop]; ok {
		cfg[hook.SubagentStop] = append(cfg[hook.SubagentStop], stop...)
		delete(cfg, hook.Stop)
	}
	set, err := hook.New(cfg, p.def.Source.Path, p.opts.Log)
	if err != nil {
		var ce *hook.ConfigError
		if errors.As(err, &ce) {
			return p.fail(p.lineOf("hooks."+ce.Field, line), "hooks", "%s: %s", ce.Field, ce.Msg)
		}
		return p.fail(line, "hooks", "%v", err)
	}
	p.def.Hooks = set
	return nil
}

// lineOf returns the file line of the front-matter key or list item at
// path ("hooks.PreToolUse[0].matcher"), or of the deepest part of it that
// exists, or fallback.
func (p *fileParser) lineOf(path string, fallback int) int {
	line := fallback
	var node ast.Node
	if len(p.doc.Docs) > 0 {
		node = p.doc.Docs[0].Body
	}
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if !lookupKey(&node, name, &line, p.offset) {
			return line
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			rest = strings.TrimPrefix(after, "[")
			seq, ok := node.(*ast.SequenceNode)
			i, err := strconv.Atoi(idx)
			if !ok || err != nil || i < 0 || i >= len(seq.Values) {
				return line
			}
			node = seq.Values[i]
			line = node.GetToken().Position.Line + p.offset
		}
	}
	return line
}

// lookupKey moves *node to the value of key in the mapping *node, setting
// *line to the key's line; it reports whether the key is there.
func lookupKey(node *ast.Node, key string, line *int, offset int) bool {
	var values []*ast.MappingValueNode
	switch m := (*node).(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	}
	for _, mv := range values {
		if mv.Key.GetToken().Value == key {
			*node, *line = mv.Value, mv.Key.GetToken().Position.Line+offset
			return true
		}
	}
	return false
}

// yamlMessage is a decoder error's message without its position.
func yamlMessage(err error) string {
	var ye yaml.Error
	if errors.As(err, &ye) {
		return ye.GetMessage()
	}
	return err.Error()
}
