package claudecode

// SetMaxLine lowers the provider's stream-json line limit for tests.
func SetMaxLine(p *Provider, n int) { p.maxLine = n }
