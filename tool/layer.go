package tool

import (
	"slices"
	"sync"
)

// Layer is a set of tools that several scopes share, such as the tools of
// the MCP servers an ACP client gave one session: a scope that has the layer
// sees its tools as it sees global ones (masked by its restrictions), and
// they shadow global tools of the same name. A scope created for a child
// agent starts with its parent's layers (see Scope.AddLayers).
type Layer struct{ t table }

// NewLayer returns an empty layer.
func NewLayer() *Layer { return &Layer{} }

// Register adds a tool to the layer and returns its disposer. A duplicate
// name is refused.
func (l *Layer) Register(def Definition) (dispose func(), err error) {
	return l.t.register(def, "layer")
}

// Names returns the layer's tool names, sorted.
func (l *Layer) Names() []string { return l.t.names() }

// AddLayers gives the scope the tools of layers, in order, a later layer
// shadowing an earlier one, and returns the disposer that takes them away.
func (s *Scope) AddLayers(layers ...*Layer) (dispose func()) {
	if len(layers) == 0 {
		return func() {}
	}
	s.mu.Lock()
	for _, l := range layers {
		s.layers = append([]*Layer{l}, s.layers...)
	}
	s.viewGen++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.layers = slices.DeleteFunc(slices.Clone(s.layers), func(x *Layer) bool { return slices.Contains(layers, x) })
			s.viewGen++
			s.mu.Unlock()
		})
	}
}

// Layers returns the scope's layers, oldest first, so that another scope
// can be given the same view with AddLayers.
func (s *Scope) Layers() []*Layer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := slices.Clone(s.layers)
	slices.Reverse(out)
	return out
}
