package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/dsh-go/dsh/bench/internal/promptcache"
	"github.com/dsh-go/dsh/bench/internal/scriptllm"
)

// scenario is one scripted run of dsh.
type scenario struct {
	name, what string
	// acp drives `dsh acp` with every prompt in one session (a fork needs
	// completed turns); otherwise `dsh run` gets the one prompt.
	acp     bool
	prompts []string
	files   map[string]int // generated in the working directory: name → about this many bytes
	// script holds each actor's replies by step. An actor is named by the
	// tag [cb:NAME] of the last user message that has one; its step is the
	// number of assistant messages after that message.
	script map[string][]scriptllm.Reply
	// children is how many delegations the script makes.
	children int
}

// scenarios returns every scenario, in order.
func scenarios() []*scenario {
	chapters := map[string]int{"chapter1.txt": 12 << 10, "chapter2.txt": 12 << 10}
	parts := map[string]int{}
	var reads []promptcache.Call
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("part%d.txt", i)
		parts[name] = 20 << 10
		reads = append(reads, call("read_file", "path", name))
	}
	return []*scenario{{
		name: "spawn", what: "a parent with a short history delegates once with subagent",
		prompts: []string{"[cb:spawn] Look at the notes, then have a helper summarise them."},
		files:   map[string]int{"notes.txt": 2 << 10},
		script: map[string][]scriptllm.Reply{
			"spawn": {
				think("I list the files first.", call("glob", "pattern", "*.txt")),
				think("A helper can summarise.", delegate("subagent", "summarise the notes", "[cb:spawn.child] Summarise notes.txt in one line.")),
				text("The helper summarised the notes."),
			},
			"spawn.child": {
				think("I read the notes.", call("read_file", "path", "notes.txt")),
				text("The notes are a list of chapters."),
			},
		},
		children: 1,
	}, {
		name: "parallel", what: "one answer makes three subagent calls",
		prompts: []string{"[cb:par] Have three helpers check three things at once."},
		script: map[string][]scriptllm.Reply{
			"par": {
				think("Three helpers at once.",
					delegate("subagent", "check a", "[cb:par.a] Check the first thing."),
					delegate("subagent", "check b", "[cb:par.b] Check the second thing."),
					delegate("subagent", "check c", "[cb:par.c] Check the third thing.")),
				text("All three checks are done."),
			},
			"par.a": {together(text("First thing checked."), "par.b#0", "par.c#0")},
			"par.b": {together(text("Second thing checked."), "par.a#0", "par.c#0")},
			"par.c": {together(text("Third thing checked."), "par.a#0", "par.b#0")},
		},
		children: 3,
	}, {
		name: "fork", what: "turn 1 reads two 12 KB files; turn 2 delegates with subagent_fork",
		acp: true,
		prompts: []string{"[cb:fork] Read the two chapters.",
			"[cb:fork.2] Have a fork of yourself review the chapters."},
		files: chapters,
		script: map[string][]scriptllm.Reply{
			"fork": {
				think("The first chapter.", call("read_file", "path", "chapter1.txt")),
				think("The second chapter.", call("read_file", "path", "chapter2.txt")),
				text("I read both chapters."),
			},
			"fork.2": {
				think("A fork keeps what I read.", delegate("subagent_fork", "review the chapters", "[cb:fork.child] Review the two chapters you read.")),
				text("The fork reviewed the chapters."),
			},
			"fork.child": {text("The chapters agree with each other.")},
		},
		children: 1,
	}, {
		name: "forks", what: "turn 1 reads five 20 KB files (about 30,000 tokens); turn 2 makes two subagent_fork calls",
		acp: true,
		prompts: []string{"[cb:forks] Read the five parts.",
			"[cb:forks.2] Have two forks of yourself review the parts."},
		files: parts,
		script: map[string][]scriptllm.Reply{
			"forks": {
				think("All five parts at once.", reads...),
				text("I read the five parts."),
			},
			"forks.2": {
				think("Two forks keep what I read.",
					delegate("subagent_fork", "review the first half", "[cb:forks.a] Review parts 1 to 3."),
					delegate("subagent_fork", "review the second half", "[cb:forks.b] Review parts 4 and 5.")),
				text("Both forks reviewed the parts."),
			},
			"forks.a": {together(text("Parts 1 to 3 are consistent."), "forks.b#0")},
			"forks.b": {together(text("Parts 4 and 5 are consistent."), "forks.a#0")},
		},
		children: 2,
	}, {
		name: "nested", what: "a spawn child that itself delegates with subagent",
		prompts: []string{"[cb:nest] Delegate a task that needs its own helper."},
		script: map[string][]scriptllm.Reply{
			"nest": {
				think("A helper will do it.", delegate("subagent", "plan the work", "[cb:nest.a] Plan the work; ask a helper for the details.")),
				text("The plan is ready."),
			},
			"nest.a": {
				think("I need the details.", delegate("subagent", "give the details", "[cb:nest.b] Give the details of the work.")),
				text("Plan: do the details in order."),
			},
			"nest.b": {text("The details are three steps.")},
		},
		children: 2,
	}, {
		name: "background", what: "a subagent call with run_in_background; its completion notice wakes the parent",
		prompts: []string{"[cb:bg] Start a background check, then wait for it."},
		script: map[string][]scriptllm.Reply{
			"bg": {
				think("In the background.", promptcache.Call{Name: "subagent",
					Arguments: args("description", "check in the background", "prompt", "[cb:bg.child] Check the workspace in the background.", "run_in_background", true)}),
				text("The check runs in the background."),
				text("The background check finished."),
			},
			// The child answers once the parent's second request is in, so
			// its notice always comes after it (as a step or a turn of its own).
			"bg.child": {together(text("The workspace is fine."), "bg#1")},
		},
		children: 1,
	}}
}

var tagRE = regexp.MustCompile(`\[cb:([a-z0-9.]+)\]`)

// actor finds who sent a request and at which step (see scenario.script).
func actor(req scriptllm.Request) (name string, step int, ok bool) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == "assistant" {
			step++
		}
		if m.Role != "user" {
			continue
		}
		if all := tagRE.FindAllStringSubmatch(m.Text, -1); all != nil {
			return all[len(all)-1][1], step, true
		}
	}
	return "", 0, false
}

// reply plays the scenario's script; an unscripted request gets a plain
// answer and a note.
func (sc *scenario) reply(req scriptllm.Request) scriptllm.Reply {
	name, step, ok := actor(req)
	steps := sc.script[name]
	if !ok || step >= len(steps) {
		rep := text("Nothing more to do.")
		rep.Note = fmt.Sprintf("request %d: no script for actor %q step %d", req.Seq, name, step)
		return rep
	}
	rep := steps[step]
	rep.Key = fmt.Sprintf("%s#%d", name, step)
	return rep
}

func text(s string) scriptllm.Reply { return scriptllm.Reply{Text: s} }

func think(reasoning string, calls ...promptcache.Call) scriptllm.Reply {
	return scriptllm.Reply{Reasoning: reasoning, Calls: calls}
}

// together holds r until the given requests have arrived too.
func together(r scriptllm.Reply, keys ...string) scriptllm.Reply {
	r.Await = keys
	return r
}

func call(name string, kv ...any) promptcache.Call {
	return promptcache.Call{Name: name, Arguments: args(kv...)}
}

func delegate(tool, description, prompt string) promptcache.Call {
	return call(tool, "description", description, "prompt", prompt)
}

// args renders key, value pairs as a JSON object, in order.
func args(kv ...any) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv[i])
		v, _ := json.Marshal(kv[i+1])
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.String()
}
