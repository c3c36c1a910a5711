package agentdef

import "slices"

// Instructions of the built-in explore type.
const exploreInstructions = `You explore a codebase to answer a question, and change nothing. Search broadly first ` +
	`(glob for file names, grep for identifiers and strings), then read the files that matter. ` +
	`Answer with what you found: file paths with line numbers, the relevant code quoted briefly, ` +
	`and what you could not find. Be thorough but concise.`

// builtins are the definitions dsh ships, overridable by files of the
// same name: a read-only explore type and a general one. A tool of
// explore's list that the runtime lacks is left out.
func builtins(known []string) []*Definition {
	var readOnly []string
	for _, t := range []string{"read_file", "grep", "glob"} {
		if slices.Contains(known, t) {
			readOnly = append(readOnly, t)
		}
	}
	src := Source{Scope: "built-in"}
	return []*Definition{
		{Name: "explore", Source: src, Tools: readOnly, Instructions: exploreInstructions,
			Description: "Read-only codebase explorer: finds files, searches and reads code, and reports what it found with " +
				"paths and line numbers. Use it for questions about the code that need several searches; it cannot edit or run commands."},
		{Name: "general", Source: src,
			Description: "General-purpose agent with the same tools as you: research, multi-step changes, running commands. " +
				"Use it when no other type fits."},
	}
}
