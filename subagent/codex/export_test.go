package codex

// SetMaxLine lowers p's stdout line limit for tests.
func SetMaxLine(p *Provider, n int) { p.maxLine = n }
