package codex

import (
	"encoding/json"
	"fmt"

	"github.com/dsh-go/dsh/permission"
)

// JSON-RPC error code for a server request the provider does not serve.
const codeMethodNotFound = -32601

// Tools a parent's permission policy names for Codex's approval requests.
const (
	approvalCommand     = "bash"
	approvalFileChange  = "edit_file"
	approvalPermissions = "codex_permissions"
)

// request implements handler: it answers Codex's server requests.
// Approvals are declined in the "never" mode; in the others they are
// decided by the parent's permission policy, which may ask the person
// behind the delegation tree (and "cancel" once the run is cancelled).
// Questions get empty answers and elicitations are declined. Any other
// request is refused and fails the run.
func (s *turnState) request(method string, params json.RawMessage) (any, *wireError) {
	s.mu.Lock()
	cancelled := s.cancelled
	s.mu.Unlock()
	approve := func(tool string) bool {
		return s.mode != PermissionNever && s.authorize(permission.Request{Tool: tool, Arguments: params})
	}
	switch method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		tool := approvalCommand
		if method == "item/fileChange/requestApproval" {
			tool = approvalFileChange
		}
		decision := "decline"
		switch {
		case cancelled:
			decision = "cancel"
		case approve(tool):
			decision = "accept"
		}
		return map[string]any{"decision": decision}, nil
	case "item/permissions/requestApproval":
		granted := json.RawMessage(`{}`)
		if !cancelled && approve(approvalPermissions) {
			var p struct {
				Permissions json.RawMessage `json:"permissions"`
			}
			if json.Unmarshal(params, &p) == nil && len(p.Permissions) > 0 && string(p.Permissions) != "null" {
				granted = p.Permissions
			}
		}
		return map[string]any{"permissions": granted, "scope": "turn"}, nil
	case "item/tool/requestUserInput":
		return map[string]any{"answers": map[string]any{}}, nil
	case "mcpServer/elicitation/request":
		return map[string]any{"action": "decline", "content": nil, "_meta": nil}, nil
	}
	s.fail(fmt.Sprintf("codex sent the unsupported server request %q", method))
	return nil, &wireError{Code: codeMethodNotFound, Message: "dsh does not serve " + method}
}
