package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/dsh-go/dsh/llm/openai"
)

// The wire protocols a model route speaks (models[].api).
const (
	// APIOpenAI is OpenAI's chat-completions protocol, which DeepSeek,
	// OpenRouter, Ollama, llama.cpp and vLLM serve too (the default).
	APIOpenAI = "openai"
	// APIAnthropic is Anthropic's Messages API.
	APIAnthropic = "anthropic"
)

// Names of the built-in model routes.
const (
	RouteDeepSeek   = "deepseek"
	RouteAnthropic  = "anthropic"
	RouteOpenAI     = "openai"
	RouteOpenRouter = "openrouter"
	RouteLocal      = "local"
)

// BuiltinRoute is a model route dsh knows without configuration.
type BuiltinRoute struct {
	Name string
	// API is APIOpenAI or APIAnthropic.
	API string
	// KeyEnv holds the route's key ("" for a route that needs none).
	KeyEnv string
	// BaseURLEnv, when set, overrides BaseURL.
	BaseURLEnv string
	BaseURL    string
	// ModelEnv, when set, overrides Model.
	ModelEnv string
	Model    string
	// PickEnv is the variable whose being set makes dsh pick the route
	// when no route is configured: KeyEnv, or for the keyless local route
	// its BaseURLEnv.
	PickEnv string
}

// BuiltinRoutes returns the built-in model routes in the order dsh picks
// among them when the configuration names none: the first whose PickEnv
// is set. DeepSeek comes first because it was dsh's only route (a user
// who has its key keeps it); then the two vendors' own APIs, in
// alphabetical order; then OpenRouter, a proxy to them that a user with a
// vendor's key most likely does not mean to pay for; then a local server,
// which needs no key and so is picked only when its URL is set.
func BuiltinRoutes() []BuiltinRoute {
	return []BuiltinRoute{
		{Name: RouteDeepSeek, API: APIOpenAI, KeyEnv: "DEEPSEEK_API_KEY", BaseURLEnv: baseURLEnv, BaseURL: "https://api.deepseek.com",
			Model: openai.DeepSeekModel},
		{Name: RouteAnthropic, API: APIAnthropic, KeyEnv: "ANTHROPIC_API_KEY", BaseURLEnv: "ANTHROPIC_BASE_URL", BaseURL: "https://api.anthropic.com",
			Model: "claude-sonnet-4-5"},
		{Name: RouteOpenAI, API: APIOpenAI, KeyEnv: "OPENAI_API_KEY", BaseURLEnv: "OPENAI_BASE_URL", BaseURL: "https://api.openai.com/v1",
			Model: "gpt-5"},
		{Name: RouteOpenRouter, API: APIOpenAI, KeyEnv: "OPENROUTER_API_KEY", BaseURLEnv: "OPENROUTER_BASE_URL", BaseURL: "https://openrouter.ai/api/v1",
			Model: "anthropic/claude-sonnet-4.5"},
		{Name: RouteLocal, API: APIOpenAI, BaseURLEnv: "DSH_LOCAL_BASE_URL", BaseURL: "http://127.0.0.1:11434/v1",
			ModelEnv: "DSH_LOCAL_MODEL", Model: "llama3.2", PickEnv: "DSH_LOCAL_BASE_URL"},
	}
}

// pickEnv is the variable that makes dsh pick r.
func (r BuiltinRoute) pickEnv() string { return cmp.Or(r.PickEnv, r.KeyEnv) }

// model is r as a route, its URL and model read from their variables.
func (r BuiltinRoute) model(getenv func(string) string) Model {
	m := Model{Name: r.Name, API: r.API, APIKeyEnv: r.KeyEnv, BaseURL: r.BaseURL, Model: r.Model, builtin: true}
	if r.BaseURLEnv != "" {
		m.BaseURL = cmp.Or(strings.TrimSpace(getenv(r.BaseURLEnv)), m.BaseURL)
	}
	if r.ModelEnv != "" {
		m.Model = cmp.Or(strings.TrimSpace(getenv(r.ModelEnv)), m.Model)
	}
	m.Price = builtinPrice(r.Name, m.Model)
	return m
}

// pickRoute returns the first built-in route whose PickEnv is set, and
// false when none is (the caller then uses DeepSeek, whose missing key is
// reported with every route's variable; see NoKeyHelp).
func pickRoute(getenv func(string) string) (BuiltinRoute, bool) {
	routes := BuiltinRoutes()
	for _, r := range routes {
		if RouteKeySet(r.Name, getenv) {
			return r, true
		}
	}
	return routes[0], false
}

// RouteChoice says how the configuration's route was chosen, in one line
// for stderr and dsh doctor: "model route anthropic, model
// claude-sonnet-4-5: ANTHROPIC_API_KEY is set (…)" when dsh picked it from
// the variables that are set, "" when a file or flag named it.
func (cfg Config) RouteChoice() string {
	if !cfg.picked {
		return ""
	}
	for _, r := range BuiltinRoutes() {
		if r.Name == cfg.Agent.Provider {
			if !cfg.pickedByKey {
				return fmt.Sprintf("model route %s: no model key is set", r.Name)
			}
			return fmt.Sprintf("model route %s, model %s: %s is set (dsh picks the first built-in route whose variable is set: %s; agent.route or --route chooses another)",
				r.Name, cfg.Agent.Model, r.pickEnv(), pickOrder())
		}
	}
	return ""
}

// RoutePicked reports whether dsh picked the route from the variables
// that are set, no file or flag naming one.
func (cfg Config) RoutePicked() bool { return cfg.picked }

func pickOrder() string { return strings.Join(PickVariables(), ", ") }

// NoKeyHelp is what dsh says when no model key is set at all: the
// variable each built-in route needs, in the order dsh picks them.
func NoKeyHelp() string {
	var b strings.Builder
	b.WriteString("no model key is set: export one of these (dsh uses the first that is set), or try the offline `dsh demo`:")
	for _, r := range BuiltinRoutes() {
		switch {
		case r.KeyEnv != "":
			fmt.Fprintf(&b, "\n  %-20s route %-10s %s (endpoint: %s, else %s)", r.KeyEnv, r.Name, r.Model, r.BaseURLEnv, r.BaseURL)
		default:
			fmt.Fprintf(&b, "\n  %-20s route %-10s an OpenAI-compatible server such as Ollama, llama.cpp or vLLM (model: %s, else %s; endpoint default %s)",
				r.PickEnv, r.Name, r.ModelEnv, r.Model, r.BaseURL)
		}
	}
	b.WriteString("\nKeys are read from the environment only: dsh never writes them to a file.")
	return b.String()
}

func builtinNames() []string {
	var names []string
	for _, r := range BuiltinRoutes() {
		names = append(names, r.Name)
	}
	return names
}

// decodeFile decodes a configuration file strictly into file. A block of
// agent options (agent:, and a subagent tool's agentOptions:) names its
// model route "route", or "provider", its old name, which makes aliased
// true; a block with both is an error.
func decodeFile(data []byte, file *Config) (aliased bool, err error) {
	parsed, err := parser.ParseBytes(data, 0)
	if err != nil {
		return false, errors.New(withSourceLine(data, yaml.FormatError(err, false, false)))
	}
	for _, doc := range parsed.Docs {
		if doc.Body == nil {
			continue
		}
		root, _ := doc.Body.(*ast.MappingNode)
		for _, block := range agentBlocks(root) {
			a, err := renameRoute(block)
			if err != nil {
				return false, err
			}
			aliased = aliased || a
		}
		dec := yaml.NewDecoder(bytes.NewReader(nil), yaml.Strict(), yaml.CustomUnmarshaler(decodeDuration))
		if err := dec.DecodeFromNode(doc.Body, file); err != nil {
			return false, errors.New(withSourceLine(data, yaml.FormatError(err, false, false)) + didYouMean(data, err, reflect.TypeFor[Config]()))
		}
		break // the first document is the configuration, as Decode reads it
	}
	return aliased, nil
}

// agentBlocks returns the agent-options mappings of a file: agent, and
// each subagents.tools[].agentOptions.
func agentBlocks(root *ast.MappingNode) []*ast.MappingNode {
	var out []*ast.MappingNode
	if m, ok := valueOf(root, "agent").(*ast.MappingNode); ok {
		out = append(out, m)
	}
	subagents, _ := valueOf(root, "subagents").(*ast.MappingNode)
	tools, _ := valueOf(subagents, "tools").(*ast.SequenceNode)
	if tools == nil {
		return out
	}
	for _, t := range tools.Values {
		if m, ok := valueOf(asMapping(t), "agentOptions").(*ast.MappingNode); ok {
			out = append(out, m)
		}
	}
	return out
}

func asMapping(n ast.Node) *ast.MappingNode {
	m, _ := n.(*ast.MappingNode)
	return m
}

// valueOf returns the value of key in m, or nil.
func valueOf(m *ast.MappingNode, key string) ast.Node {
	if m == nil {
		return nil
	}
	for _, mv := range m.Values {
		if mv.Key != nil && mv.Key.String() == key {
			return mv.Value
		}
	}
	return nil
}

// renameRoute turns an agent-options block's "route" key into the
// decoder's "provider", reporting whether the block used "provider", the
// old name, itself.
func renameRoute(m *ast.MappingNode) (aliased bool, err error) {
	var route, provider *ast.MappingValueNode
	for _, mv := range m.Values {
		switch mv.Key.String() {
		case "route":
			route = mv
		case "provider":
			provider = mv
		}
	}
	if route != nil && provider != nil {
		return false, fmt.Errorf("line %d: route and provider (its old name) are both set: keep route alone", provider.Key.GetToken().Position.Line)
	}
	if route != nil {
		key, ok := route.Key.(*ast.StringNode)
		if !ok {
			return false, fmt.Errorf("line %d: route: a plain key expected", route.Key.GetToken().Position.Line)
		}
		key.Value = "provider"
	}
	return provider != nil, nil
}

// UseRoute points top-level agents at route, on model when it is set and
// else on the route's own, as --route and --model do. An unknown route is
// an error listing the configured ones.
func (cfg *Config) UseRoute(route, model string) error {
	if strings.TrimSpace(model) != model {
		return fmt.Errorf("--model %q: a model id has no surrounding spaces", model)
	}
	if route != "" {
		if !slices.ContainsFunc(cfg.Models, func(m Model) bool { return m.Name == route }) {
			return fmt.Errorf("--route %q: not a configured model route (the routes are %s; declare another under models: in dsh.yaml)",
				route, strings.Join(cfg.routeNames(), ", "))
		}
		cfg.Agent.Provider, cfg.Agent.Model = route, cfg.ModelOf(route)
		cfg.picked, cfg.pickedByKey = false, false
	}
	if model != "" {
		cfg.Agent.Model = model
	}
	return nil
}

func (cfg Config) routeNames() []string {
	var names []string
	for _, m := range cfg.Models {
		names = append(names, m.Name)
	}
	return names
}

// KeysSet returns the variables of the built-in routes that are set, in
// the order dsh picks among them.
func KeysSet(getenv func(string) string) []string {
	var out []string
	for _, r := range BuiltinRoutes() {
		if RouteKeySet(r.Name, getenv) {
			out = append(out, r.pickEnv())
		}
	}
	return out
}

// RouteKeySet reports whether the variable that makes dsh pick the
// built-in route named route is set.
func RouteKeySet(route string, getenv func(string) string) bool {
	for _, r := range BuiltinRoutes() {
		if r.Name == route {
			return strings.TrimSpace(getenv(r.pickEnv())) != ""
		}
	}
	return false
}

// PickVariables lists the variables dsh picks a built-in route by, in
// order.
func PickVariables() []string {
	var out []string
	for _, r := range BuiltinRoutes() {
		out = append(out, r.pickEnv())
	}
	return out
}

// BaseURLEnv returns the variable that sets the endpoint of the built-in
// route named route, or "".
func BaseURLEnv(route string) string {
	for _, r := range BuiltinRoutes() {
		if r.Name == route {
			return r.BaseURLEnv
		}
	}
	return ""
}
