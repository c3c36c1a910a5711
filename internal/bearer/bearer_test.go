package bearer_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/bearer"
)

// LoadToken generates a token once (0600, in a directory it creates) and
// reuses it; it refuses a file others may read, a symlink, and a file
// without a token.
func TestLoadToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "home", "mcp-token")
	token, created, err := bearer.LoadToken(path)
	if err != nil || !created || len(token) < bearer.MinTokenLen {
		t.Fatalf("first load: %q %v %v", token, created, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v %v", fi.Mode(), err)
	}
	if again, created, err := bearer.LoadToken(path); err != nil || created || again != token {
		t.Errorf("second load: %q %v %v, want %q", again, created, err, token)
	}
	if other, _, _ := bearer.LoadToken(filepath.Join(t.TempDir(), "t")); other == token {
		t.Error("two files got the same token")
	}

	dir := t.TempDir()
	for _, tc := range []struct {
		name, want string
		make       func(string) error
	}{
		{"wide", "has mode 0640", func(p string) error { return os.WriteFile(p, []byte(token), 0o640) }},
		{"link", "not a regular file", func(p string) error { return os.Symlink(path, p) }},
		{"short", "holds no token", func(p string) error { return os.WriteFile(p, []byte("abc\n"), 0o600) }},
		{"spaces", "holds no token", func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("a b", 20)), 0o600) }},
	} {
		p := filepath.Join(dir, tc.name)
		if err := tc.make(p); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o640) // WriteFile's mode is subject to the umask
		if tc.name != "wide" {
			os.Chmod(p, 0o600)
		}
		if _, _, err := bearer.LoadToken(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Require passes only "Bearer <token>" (scheme in any case).
func TestRequire(t *testing.T) {
	token := strings.Repeat("k", 40)
	h := bearer.Require(token, "dsh test", "send the token", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for auth, want := range map[string]int{
		"":                      http.StatusUnauthorized,
		"Bearer":                http.StatusUnauthorized,
		"Bearer ":               http.StatusUnauthorized,
		"Bearer " + token[1:]:   http.StatusUnauthorized,
		"Bearer " + token + "x": http.StatusUnauthorized,
		"Basic " + token:        http.StatusUnauthorized,
		token:                   http.StatusUnauthorized,
		"Bearer " + token:       http.StatusTeapot,
		"bearer " + token:       http.StatusTeapot,
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Authorization %q: %d, want %d", auth, w.Code, want)
		}
		if want == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: no WWW-Authenticate", auth)
		}
	}
}
