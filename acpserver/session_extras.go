package acpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// Route is a model a session can switch to through its "model" config
// option (and /model).
type Route struct {
	Provider string // the model route: a configured model name
	Model    string // the model id
}

// modelOption is the id of the session config option that picks the model.
const modelOption = "model"

// routeValues names each route for the client: its model id, or
// "route/model" when another route serves the same id.
func routeValues(routes []Route) []string {
	count := map[string]int{}
	for _, r := range routes {
		count[r.Model]++
	}
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.Model
		if count[r.Model] > 1 || r.Model == "" {
			out[i] = r.Provider + "/" + r.Model
		}
	}
	return out
}

// routes returns the routes a session may pick, the session's own first
// when it is not among Options.Routes.
func (s *server) routes(ss *acpSession) []Route {
	o := ss.agent.Options()
	cur := Route{Provider: o.Provider, Model: o.Model}
	if !slices.Contains(s.opts.Routes, cur) {
		return append([]Route{cur}, s.opts.Routes...)
	}
	return s.opts.Routes
}

// configOptions are a session's config options: the model, when the
// server knows its routes.
func (s *server) configOptions(ss *acpSession) []acpsdk.SessionConfigOption {
	if len(s.opts.Routes) == 0 {
		return nil
	}
	routes := s.routes(ss)
	values := routeValues(routes)
	o := ss.agent.Options()
	var options acpsdk.SessionConfigSelectOptionsUngrouped
	current := ""
	for i, r := range routes {
		desc := "model " + r.Model + " on route " + r.Provider
		options = append(options, acpsdk.SessionConfigSelectOption{Value: acpsdk.SessionConfigValueId(values[i]), Name: values[i], Description: &desc})
		if r.Provider == o.Provider && r.Model == o.Model {
			current = values[i]
		}
	}
	category := acpsdk.SessionConfigOptionCategoryModel
	desc := "the model of the session's next model calls (dsh run -m, --provider)"
	return []acpsdk.SessionConfigOption{{Select: &acpsdk.SessionConfigOptionSelect{Id: modelOption, Name: "Model", Type: "select",
		Category: &category, Description: &desc, CurrentValue: acpsdk.SessionConfigValueId(current),
		Options: acpsdk.SessionConfigSelectOptions{Ungrouped: &options}}}}
}

// pickRoute finds the route a value names: an option's value, a route's
// "route/model", or a route's name.
func (s *server) pickRoute(ss *acpSession, value string) (Route, error) {
	routes := s.routes(ss)
	values := routeValues(routes)
	for i, r := range routes {
		if values[i] == value || r.Provider+"/"+r.Model == value {
			return r, nil
		}
	}
	for _, r := range routes {
		if r.Provider == value {
			return r, nil
		}
	}
	return Route{}, &acpsdk.RequestError{Code: -32602, Message: fmt.Sprintf("unknown model %q; the models: %s", value, strings.Join(values, ", "))}
}

// SetSessionConfigOption implements acpsdk.Agent: "model" switches the
// route and model of the session's next model calls.
func (s *server) SetSessionConfigOption(_ context.Context, p acpsdk.SetSessionConfigOptionRequest) (acpsdk.SetSessionConfigOptionResponse, error) {
	if p.ValueId == nil {
		return acpsdk.SetSessionConfigOptionResponse{}, acpsdk.NewInvalidParams("dsh's config options take a value id")
	}
	ss, err := s.session(p.ValueId.SessionId)
	if err != nil {
		return acpsdk.SetSessionConfigOptionResponse{}, err
	}
	if p.ValueId.ConfigId != modelOption || len(s.opts.Routes) == 0 {
		return acpsdk.SetSessionConfigOptionResponse{}, acpsdk.NewInvalidParams(fmt.Sprintf("unknown config option %q", p.ValueId.ConfigId))
	}
	r, err := s.pickRoute(ss, string(p.ValueId.Value))
	if err != nil {
		return acpsdk.SetSessionConfigOptionResponse{}, err
	}
	ss.agent.SetRoute(r.Provider, r.Model)
	return acpsdk.SetSessionConfigOptionResponse{ConfigOptions: s.configOptions(ss)}, nil
}

// commands are the slash commands a session answers itself, without the
// model.
var commands = []acpsdk.AvailableCommand{
	{Name: "model", Description: "show the model, or switch the next calls to another: /model NAME",
		Input: &acpsdk.AvailableCommandInput{Unstructured: &acpsdk.UnstructuredCommandInput{Hint: "model"}}},
	{Name: "cost", Description: "show the tokens the session has spent, children included"},
}

// greet sends what a client shows of a session from its start: the slash
// commands it answers.
func (s *server) greet(ss *acpSession) {
	ss.updates.send(acpsdk.SessionUpdate{AvailableCommandsUpdate: &acpsdk.SessionAvailableCommandsUpdate{
		SessionUpdate: "available_commands_update", AvailableCommands: commands}})
}

// command answers a prompt that is one of the session's slash commands,
// and reports whether it was.
func (s *server) command(ss *acpSession, text string) (bool, error) {
	name, arg, _ := strings.Cut(strings.TrimSpace(text), " ")
	arg = strings.TrimSpace(arg)
	var reply string
	switch name {
	case "/model":
		if arg != "" && len(s.opts.Routes) > 0 {
			r, err := s.pickRoute(ss, arg)
			if err != nil {
				return true, err
			}
			ss.agent.SetRoute(r.Provider, r.Model)
			ss.updates.send(acpsdk.SessionUpdate{ConfigOptionUpdate: &acpsdk.SessionConfigOptionUpdate{
				SessionUpdate: "config_option_update", ConfigOptions: s.configOptions(ss)}})
		}
		o := ss.agent.Options()
		reply = fmt.Sprintf("model %s on route %s", o.Model, o.Provider)
		if vs := routeValues(s.routes(ss)); len(s.opts.Routes) > 0 {
			reply += " (/model NAME switches to: " + strings.Join(vs, ", ") + ")"
		}
	case "/cost":
		byModel := subagent.UsageFromEvents(ss.agent.Session().Events())
		if len(byModel) == 0 {
			reply = "no tokens spent yet"
		}
		for _, k := range slices.Sorted(maps.Keys(byModel)) {
			reply += fmt.Sprintf("%s: tokens %s\n", k, byModel[k])
		}
	default:
		return false, nil
	}
	ss.updates.send(acpsdk.UpdateAgentMessageText(strings.TrimSpace(reply)))
	return true, nil
}

// titled sends the session's title, from its first prompt, once.
func (s *server) titled(ss *acpSession, prompt string) {
	for _, e := range ss.agent.Session().Events() {
		if e.Type == session.TypeUserMessage {
			return // not the first prompt
		}
	}
	title := oneLine(prompt, 80)
	ss.updates.send(acpsdk.SessionUpdate{SessionInfoUpdate: &acpsdk.SessionSessionInfoUpdate{
		SessionUpdate: "session_info_update", Title: &title}})
}

// usage sends the context the session's last model call used against its
// model's window, when the window is known, with the session's cost when
// its routes have prices.
func (s *server) usage(ss *acpSession) {
	if s.opts.ContextWindow == nil {
		return
	}
	events := ss.agent.Session().Events()
	for i := len(events) - 1; i >= 0; i-- {
		m, ok := events[i].Data.(session.AssistantMessage)
		if !ok || m.Usage == nil {
			continue
		}
		size := s.opts.ContextWindow(m.Message.Source.Provider, m.Message.Source.Model)
		if size <= 0 {
			return
		}
		up := &acpsdk.SessionUsageUpdate{SessionUpdate: "usage_update", Size: size,
			Used: int(m.Usage.Input + m.Usage.CacheRead + m.Usage.Output)}
		if s.opts.Cost != nil {
			if cost, ok := s.opts.Cost(subagent.UsageFromEvents(events)); ok {
				up.Cost = &acpsdk.Cost{Amount: cost, Currency: "USD"}
			}
		}
		ss.updates.send(acpsdk.SessionUpdate{UsageUpdate: up})
		return
	}
}

// answered is told of each response written to the client: once the
// answer to session/new is out, the client knows the session, and is sent
// its commands.
func (s *server) answered(frame []byte) {
	id := sessionIDOf(frame)
	if id == "" {
		return
	}
	s.mu.Lock()
	ss := s.sessions[acpsdk.SessionId(id)]
	greet := ss != nil && ss.greet
	if greet {
		ss.greet = false
	}
	s.mu.Unlock()
	if greet {
		go s.greet(ss) // not under the writer's lock, which this runs under
	}
}

// costOf is the cost in USD of usage per "route/model", when priced.
type costOf = func(map[string]content.Usage) (float64, bool)

// sessionIDOf returns the sessionId of a session/new result frame, "" for
// any other frame.
func sessionIDOf(frame []byte) string {
	var m struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if json.Unmarshal(frame, &m) != nil {
		return ""
	}
	return m.Result.SessionID
}
