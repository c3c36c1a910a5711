package acpchild

// PoolStats says how many processes p's pool holds and has started (0, 0
// without a pool).
func PoolStats(p *Provider) (held, started int) {
	if p.pool == nil {
		return 0, 0
	}
	return p.pool.Stats()
}

// ProcessPID returns the pid of the process a run's session lives in.
func ProcessPID(r any) int { return r.(*run).proc.PID() }

// Pooled reports whether p keeps processes warm.
func Pooled(p *Provider) bool { return p.pool != nil }
