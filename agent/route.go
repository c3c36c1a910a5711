package agent

// route is the model route and model id an agent calls.
type route struct{ provider, model string }

// SetRoute switches the model route (a configured model name) and model
// id of the agent's next model calls; its session logs the change with the
// next request's header. A running step keeps the route it started with.
func (a *Agent) SetRoute(provider, model string) {
	a.route.Store(&route{provider: provider, model: model})
}

// routeOf returns the route the agent calls now.
func (a *Agent) routeOf() (provider, model string) {
	if r := a.route.Load(); r != nil {
		return r.provider, r.model
	}
	o := a.options()
	return o.Provider, o.Model
}
