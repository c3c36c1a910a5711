package hook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The permission decisions of a PreToolUse hook (Decision.Permission).
const (
	// Allow lets the call run without asking the user (a policy that
	// denies the tool still denies it).
	Allow = "allow"
	// Ask makes dsh ask the user, as the policy's ask does, even when the
	// policy allows the tool.
	Ask = "ask"
	// Deny refuses the call: Decide returns a *Blocked.
	Deny = "deny"
)

// Decision is what the hooks of an event decided through the JSON they
// printed on stdout (Claude Code's hook output) besides blocking, which
// Decide returns as a *Blocked.
type Decision struct {
	// Permission is the strongest permissionDecision of PreToolUse hooks
	// short of deny (ask over allow), with legacy decision approve as
	// allow; "" when none gave one.
	Permission string
	// Reason is the permissionDecisionReason that came with Permission.
	Reason string
	// UpdatedInput are the call's new arguments (PreToolUse updatedInput),
	// in dsh's names; nil when no hook changed them.
	UpdatedInput json.RawMessage
	// Context is the additionalContext the hooks gave, and, for
	// SessionStart and UserPromptSubmit, the plain text they printed: for
	// the model to read.
	Context []string
	// Stop is set when a hook printed continue: false: the agent stops
	// after this event, with StopReason for the user.
	Stop       bool
	StopReason string
}

// MaxContext bounds the bytes of one hook's additional context that reach
// the model (Claude Code's bound); the rest is cut, and the cut said.
const MaxContext = 10_000

// addContext adds c to d's context, bounded by MaxContext.
func (d *Decision) addContext(c string) {
	if c = strings.TrimSpace(c); c == "" {
		return
	}
	if len(c) > MaxContext {
		n := MaxContext
		for n > 0 && !utf8.RuneStart(c[n]) {
			n--
		}
		c = c[:n] + fmt.Sprintf("\n[cut: the hook's context was %d bytes, at most %d are kept]", len(c), MaxContext)
	}
	d.Context = append(d.Context, c)
}

// output is the part of Claude Code's hook output dsh reads.
type output struct {
	Continue       *bool  `json:"continue"`
	StopReason     string `json:"stopReason"`
	SuppressOutput bool   `json:"suppressOutput"`
	SystemMessage  string `json:"systemMessage"`
	Decision       string `json:"decision"`
	Reason         string `json:"reason"`
	Specific       struct {
		PermissionDecision       string          `json:"permissionDecision"`
		PermissionDecisionReason string          `json:"permissionDecisionReason"`
		UpdatedInput             json.RawMessage `json:"updatedInput"`
		AdditionalContext        string          `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

// parseOutput reads a hook's stdout: a JSON object is Claude Code's hook
// output; anything else is plain text (ok false). Text that opens like an
// object but is not one the decoder reads is an error.
func parseOutput(stdout string) (out output, ok bool, err error) {
	b := bytes.TrimSpace([]byte(stdout))
	if len(b) == 0 || b[0] != '{' {
		return out, false, nil
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return output{}, false, err
	}
	return out, true, nil
}

// apply folds the output of one hook of in.Event into d. It returns a
// *Blocked when the output blocks (decision block, permissionDecision
// deny), and an error naming the problem for a PreToolUse decision it
// cannot honour (an updatedInput that is not an object, an unknown
// permissionDecision): a guard must not fail open.
func (d *Decision) apply(h compiled, in Input, out output) error {
	block := func(reason string) error {
		if strings.TrimSpace(reason) == "" {
			reason = "(the hook gave no reason)"
		}
		return &Blocked{Event: h.event, Command: h.command, Reason: reason}
	}
	if out.Continue != nil && !*out.Continue {
		d.Stop, d.StopReason = true, out.StopReason
	}
	d.addContext(out.Specific.AdditionalContext)
	switch in.Event {
	case PreToolUse:
		perm, reason := out.Specific.PermissionDecision, out.Specific.PermissionDecisionReason
		switch out.Decision { // Claude Code's older fields
		case "block":
			perm, reason = cmpOr(perm, Deny), cmpOr(reason, out.Reason)
		case "approve":
			perm, reason = cmpOr(perm, Allow), cmpOr(reason, out.Reason)
		case "":
		default:
			return block(fmt.Sprintf("the hook printed decision %q (want block or approve), so the call was not allowed", out.Decision))
		}
		switch perm {
		case Deny:
			return block(reason)
		case Ask:
			d.Permission, d.Reason = Ask, reason
		case Allow:
			if d.Permission == "" {
				d.Permission, d.Reason = Allow, reason
			}
		case "", "defer":
		default:
			return block(fmt.Sprintf("the hook printed permissionDecision %q (want allow, deny or ask), so the call was not allowed", perm))
		}
		if u := out.Specific.UpdatedInput; len(u) > 0 && string(u) != "null" {
			args, err := dshInput(in.ToolName, u)
			if err != nil || !bytes.HasPrefix(bytes.TrimSpace(u), []byte("{")) {
				return block("the hook printed an updatedInput that is not a JSON object, so the call was not allowed")
			}
			d.UpdatedInput = args
		}
	default:
		if out.Decision == "block" {
			return block(out.Reason)
		}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
