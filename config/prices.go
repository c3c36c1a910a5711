package config

// builtinPrice returns the list price, in US dollars per million tokens,
// of model on a built-in route when model is the route's default one (as
// listed when this table was written), else nil. A route's price block
// (models[].price) overrides it.
func builtinPrice(route, model string) *Price {
	var p Price
	switch {
	case route == RouteDeepSeek && model == "deepseek-flash":
		p = Price{Input: 0.28, CachedInput: 0.028, Output: 0.42}
	case route == RouteAnthropic && model == "claude-sonnet-4-5",
		route == RouteOpenRouter && model == "anthropic/claude-sonnet-4.5":
		p = Price{Input: 3, CachedInput: 0.30, CacheWrite: 3.75, Output: 15}
	case route == RouteOpenAI && model == "gpt-5":
		p = Price{Input: 1.25, CachedInput: 0.125, Output: 10}
	default:
		return nil
	}
	return &p
}
