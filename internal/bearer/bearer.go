// Package bearer keeps the bearer token of dsh's HTTP servers (dsh mcp
// --listen, dsh a2a): the token file and the check of each request.
package bearer

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// MinTokenLen is the shortest bearer token LoadToken accepts.
const MinTokenLen = 32

// LoadToken returns the bearer token HTTP clients must send, read from
// path, or generated with crypto/rand and written there (mode 0600, its
// directory created 0700) when path does not exist; created says which.
// A file that is not a regular file, that another user owns, that others
// may read or write (any mode bit beyond 0600), or that holds no token of
// at least MinTokenLen printable characters is refused, never repaired: a
// token others could read may already be known.
func LoadToken(path string) (token string, created bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createToken(path)
	}
	if err != nil {
		return "", false, err
	}
	switch uid, ok := owner(fi); {
	case !fi.Mode().IsRegular():
		return "", false, fmt.Errorf("token file %s is not a regular file (%s)", path, fi.Mode().Type())
	case ok && uid != os.Getuid():
		return "", false, fmt.Errorf("token file %s belongs to uid %d, not to this user", path, uid)
	case fi.Mode().Perm()&0o177 != 0:
		return "", false, fmt.Errorf("token file %s has mode %04o: others may have read the token; remove the file for a new token, or chmod 600 it to keep this one",
			path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false, err
	}
	token = strings.TrimSpace(string(b))
	if len(token) < MinTokenLen || strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", false, fmt.Errorf("token file %s holds no token (at least %d printable characters without spaces); remove it for a new one",
			path, MinTokenLen)
	}
	return token, false, nil
}

// createToken writes a new random token to path, which must not exist.
func createToken(path string) (string, bool, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, err
	}
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather)
	token := hex.EncodeToString(b[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, err
	}
	_, err = f.WriteString(token + "\n")
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(path)
		return "", false, err
	}
	return token, true, nil
}

// Require serves next only the requests whose Authorization header is
// "Bearer " followed by token (compared in constant time); any other gets
// 401, with realm in its WWW-Authenticate header and hint as its body,
// before next sees it.
func Require(token, realm, hint string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
			http.Error(w, hint, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
