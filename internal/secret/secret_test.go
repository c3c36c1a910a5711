package secret

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
)

const sentinel = "sk-SENTINEL-4c1d9e"

func TestURLSecrets(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"https://api.example.com/v1", nil},
		{"not a url", nil},
		{"https://user:hunter2pw@api.example.com/v1", []string{"hunter2pw"}},
		{"https://tok_abcdef@api.example.com", []string{"tok_abcdef"}},
		{"https://api.example.com/v1?api-version=2024-01-01&key=abc123xyz", []string{"abc123xyz"}},
		{"https://h.example?x=0123456789abcdef01", []string{"0123456789abcdef01"}},
		{"https://u:p%2Fw0rd!@h.example", []string{"p%2Fw0rd%21", "p/w0rd!"}},
	} {
		if got := URLSecrets(tc.url); !slices.Equal(got, tc.want) {
			t.Errorf("URLSecrets(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

func TestRedactor(t *testing.T) {
	r := NewRedactor("short", "  sk-abcdef123  ", "sk-abcdef123456", "")
	if got := r.String("key sk-abcdef123456 and sk-abcdef123, short"); got != "key [REDACTED] and [REDACTED], short" {
		t.Fatalf("String = %q", got)
	}
	var buf bytes.Buffer
	w := r.Writer(&buf)
	if n, err := w.Write([]byte("log: sk-abcdef123\n")); err != nil || n != 18 {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if buf.String() != "log: [REDACTED]\n" {
		t.Fatalf("written %q", buf.String())
	}
	if none := NewRedactor("tiny"); none.Empty() || none.String("tiny") != "tiny" {
		t.Fatal("a redactor with no secret changes things")
	}
	var nilR *Redactor
	if nilR.String("x") != "x" || !nilR.Empty() {
		t.Fatal("a nil redactor changes things")
	}
}

// Credentials dsh was not told about are redacted from text by their
// format; stored events are not rewritten for them (tool results were
// redacted before they were stored).
func TestRedactorFindsFormats(t *testing.T) {
	const ghp = "ghp_0123456789abcdefABCDEF0123456789abcd"
	r := NewRedactor()
	in := "DATABASE_URL=postgres://app:SENTINEL@db/x\nGH_PAT=" + ghp + "\nkeep this"
	want := "DATABASE_URL=postgres://app:[REDACTED]@db/x\nGH_PAT=[REDACTED]\nkeep this"
	if got := r.String(in); got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	var buf bytes.Buffer
	if _, err := r.Writer(&buf).Write([]byte("error: " + ghp + "\n")); err != nil || buf.String() != "error: [REDACTED]\n" {
		t.Fatalf("Writer wrote %q, %v", buf.String(), err)
	}
	var logged bytes.Buffer
	slog.New(r.Handler(slog.NewTextHandler(&logged, nil))).Info("call", "url", "https://u:SENTINELpw@h")
	if strings.Contains(logged.String(), "SENTINELpw") {
		t.Fatalf("logged %q", logged.String())
	}
	mem := session.NewMemoryBackend()
	if r.Backend(mem) != session.Backend(mem) {
		t.Fatal("a redactor of no known value rewrites stored events")
	}
}

// Stored events never hold a secret, whatever field it is in; the events
// in memory are left alone.
func TestBackendRedactsStoredEvents(t *testing.T) {
	mem := session.NewMemoryBackend()
	r := NewRedactor(sentinel, `key"with<quote>`)
	store := session.NewStore(r.Backend(mem), nil)
	s, detach, err := store.Create(session.CreateOptions{ID: "s1", Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	if _, err := s.Append(session.TypeUserMessage, content.UserText("my key is "+sentinel+` and key"with<quote>`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	_, events, p, err := mem.Load("s1")
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	var stored bytes.Buffer
	for _, e := range events {
		b, _ := e.AppendJSON(nil)
		stored.Write(b)
	}
	if strings.Contains(stored.String(), sentinel) || strings.Contains(stored.String(), "with<quote>") ||
		!strings.Contains(stored.String(), "my key is [REDACTED] and [REDACTED]") {
		t.Fatalf("stored: %s", stored.String())
	}
	if !strings.Contains(content.JoinText(s.Messages()[0].Content), sentinel) {
		t.Fatal("the event in memory was changed")
	}
}

// FuzzRedact: no credential-like secret (letters, digits, - and _)
// survives redaction, and URLSecrets never panics.
func FuzzRedact(f *testing.F) {
	f.Add("the key sk-abc123 is here: sk-abc123sk-abc123", "sk-abc123", "abc123sk")
	f.Add("REDACTED", "REDACTED", "EDACTEDX")
	f.Add("https://u:pw1234567@h/x?key=value123", "pw1234567", "value123")
	f.Add("aaaaaaaaaaaa", "aaaaaa", "aaaaaaa")
	f.Fuzz(func(t *testing.T, text, s1, s2 string) {
		URLSecrets(text)
		r := NewRedactor(s1, s2)
		out := r.String(text)
		for _, s := range []string{strings.TrimSpace(s1), strings.TrimSpace(s2)} {
			if len(s) < MinLen || strings.Contains(Marker, s) || strings.IndexFunc(s, func(c rune) bool {
				return !(unicode.IsLetter(c) || unicode.IsDigit(c) || c == '-' || c == '_')
			}) >= 0 {
				continue
			}
			if strings.Contains(out, s) {
				t.Fatalf("%q survives in %q (from %q)", s, out, text)
			}
		}
	})
}

// The redacting backend keeps what the store asks of the backend it wraps:
// a file store stays durable (children can continue in a later process)
// and readable without writing (readers never take a live writer's lock);
// the memory store is not durable.
func TestBackendKeepsTheStoreKind(t *testing.T) {
	r := NewRedactor(sentinel)
	files := session.NewStore(r.Backend(jsonl.New(t.TempDir())), nil)
	if !files.Durable() {
		t.Error("a redacted file store is not durable")
	}
	if _, ok := r.Backend(jsonl.New(t.TempDir())).(session.Reader); !ok {
		t.Error("a redacted file store is not a session.Reader")
	}
	mem := r.Backend(session.NewMemoryBackend())
	if session.NewStore(mem, nil).Durable() {
		t.Error("a redacted memory store is durable")
	}
}
