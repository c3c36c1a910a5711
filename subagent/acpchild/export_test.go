package acpchild

// PoolStats says how many processes p's pool holds and has started (0, 0
// without a pool).
func PoolStats(p *Provider) (held, started int) {
	if p.pool == nil {
		return 0, 0
	}
	return p.pool.Stats()
}
