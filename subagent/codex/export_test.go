package codex

// SetMaxLine lowers p's stdout line limit for tests.
func SetMaxLine(p *Provider, n int) { p.maxLine = n }

// PoolStats says how many processes p's pool holds and has started (0, 0
// without a pool).
func PoolStats(p *Provider) (held, started int) {
	if p.pool == nil {
		return 0, 0
	}
	return p.pool.Stats()
}

// ProcessPID returns the pid of the Codex process a run's thread lives in.
func ProcessPID(r any) int { return r.(*run).proc.PID() }
