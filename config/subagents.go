package config

import (
	"cmp"
	"fmt"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
)

// mountSubagents registers the declared providers and mounts their tools.
func (cfg Config) mountSubagents(rt *dsh.Runtime) error {
	if cfg.Subagents == nil {
		return nil
	}
	for _, p := range cfg.Subagents.Providers {
		prov, err := inproc.New(inproc.Config{Name: p.Name, Agents: rt.Agents, Fork: cmp.Or(p.Kind, p.Name) == KindFork})
		if err != nil {
			return err
		}
		if _, err := rt.Subagents.Register(prov); err != nil {
			return fmt.Errorf("subagent provider %s: %w", p.Name, err)
		}
	}
	for _, t := range cfg.Subagents.Tools {
		if _, err := subagenttool.Mount(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks,
			Events: rt.Events, Log: rt.Log}, t); err != nil {
			return err
		}
	}
	return nil
}
