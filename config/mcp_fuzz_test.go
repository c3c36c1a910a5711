package config

import "testing"

// FuzzProjectMCP reads a project's .mcp.json, a file from whatever
// repository dsh runs in: never a panic, and every server it keeps is
// valid and names no credential variable.
func FuzzProjectMCP(f *testing.F) {
	for _, seed := range []string{
		`{"mcpServers":{"fs":{"command":"npx","args":["-y","srv","."],"env":{"A":"${B:-c}"}}}}`,
		`{"mcpServers":{"web":{"type":"http","url":"https://x/mcp","headers":{"Authorization":"Bearer ${TOKEN}"}}}}`,
		`{"mcpServers":{"a__b":{"command":"x"},"ok":{"type":"sse","url":"http://h"},"bad":{"type":"ws"}}}`,
		`{"mcpServers":{"x":{"command":5,"args":"no","startTimeout":"soon"}}}`,
		`{"mcpServers": `,
		"mcpServers:\n  y:\n    command: c\n    args: [&a x, *a]\n",
		`[]`,
		`{"mcpServers":{"k":{"command":"sh","env":{"K":"${DEEPSEEK_API_KEY}"},"passEnv":["GITHUB_TOKEN"]}}}`,
		"a0: &a0 [x,x,x]\na1: &a1 [*a0,*a0,*a0]\nmcpServers:\n  x: {command: echo, args: *a1}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		servers, _ := Config{}.parseProjectMCP(".mcp.json", data)
		for name, srv := range servers {
			if err := srv.Validate(name); err != nil {
				t.Fatalf("kept an invalid server %q: %v", name, err)
			}
			if v, _ := (Config{}).credentialRef(srv); v != "" {
				t.Fatalf("kept server %q, which names the credential variable %s", name, v)
			}
		}
	})
}
