package secret

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/internal/secret/pattern"
	"github.com/dsh-go/dsh/session"
)

const (
	// Marker replaces every secret.
	Marker = "[REDACTED]"
	// MinLen is the shortest value redacted: shorter ones would mangle
	// ordinary text (and are no credentials worth the name).
	MinLen = 6
)

// Redactor replaces known secret values, and in text (String, Writer,
// Handler) credentials in a known format too (internal/secret/pattern).
// Stored events are redacted of known values only: what tools return
// was redacted before it reached the model or the log. A nil Redactor
// changes nothing.
type Redactor struct {
	secrets  []string // longest first
	replacer *strings.Replacer
}

// NewRedactor redacts values (surrounding spaces trimmed) of at least
// MinLen bytes; shorter and duplicate values are ignored.
func NewRedactor(values ...string) *Redactor {
	var secrets []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) < MinLen {
			continue
		}
		// Also as JSON writes it, for stored events.
		quoted, _ := json.Marshal(v)
		for _, form := range []string{v, string(quoted[1 : len(quoted)-1])} {
			if !slices.Contains(secrets, form) {
				secrets = append(secrets, form)
			}
		}
	}
	if len(secrets) == 0 {
		return &Redactor{}
	}
	// Longest first: where two secrets start at one place, the longer
	// wins, so that no secret survives in part of another's match.
	slices.SortStableFunc(secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, Marker)
	}
	return &Redactor{secrets: secrets, replacer: strings.NewReplacer(pairs...)}
}

// Empty reports whether r redacts nothing (only a nil Redactor does).
func (r *Redactor) Empty() bool { return r == nil }

// knowsNone reports whether r knows no secret value.
func (r *Redactor) knowsNone() bool { return r == nil || r.replacer == nil }

// String returns s with every secret, and every credential in a known
// format, replaced by Marker.
func (r *Redactor) String(s string) string {
	if r.Empty() {
		return s
	}
	if !r.knowsNone() {
		s = r.replacer.Replace(s)
	}
	return pattern.Replace(s, Marker)
}

// contains reports whether s holds a secret or a credential in a known
// format.
func (r *Redactor) contains(s string) bool {
	return r.holdsKnown(s) || !r.Empty() && pattern.Value(s)
}

// holdsKnown reports whether s holds a known secret value.
func (r *Redactor) holdsKnown(s string) bool {
	if r.knowsNone() {
		return false
	}
	for _, v := range r.secrets {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

// Writer returns a writer that redacts each Write before passing it to w.
// A secret split across two writes is not caught; line-oriented writers
// (loggers, printers) never split one.
func (r *Redactor) Writer(w io.Writer) io.Writer {
	if r.Empty() {
		return w
	}
	return &writer{r: r, w: w}
}

type writer struct {
	r *Redactor
	w io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	if !w.r.contains(string(p)) {
		return w.w.Write(p)
	}
	if _, err := io.WriteString(w.w, w.r.String(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Handler returns h with the message and every attribute value of each
// record redacted.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	if r.Empty() {
		return h
	}
	return &handler{h: h, r: r}
}

type handler struct {
	h slog.Handler
	r *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.r.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.r.attr(a)
	}
	return &handler{h: h.h.WithAttrs(clean), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(name), r: h.r}
}

// attr redacts an attribute's value (as text, when it holds a secret).
func (r *Redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		group := v.Group()
		clean := make([]any, len(group))
		for i, g := range group {
			clean[i] = r.attr(g)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindString, slog.KindAny:
		if s := v.String(); r.contains(s) {
			return slog.String(a.Key, r.String(s))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// Backend returns b with every event redacted of the known secret values
// before it is stored. It is a session.Reader when b is one, and as
// durable as b.
func (r *Redactor) Backend(b session.Backend) session.Backend {
	if r.knowsNone() {
		return b
	}
	rb := &backend{Backend: b, r: r}
	if reader, ok := b.(session.Reader); ok {
		return &readerBackend{backend: rb, reader: reader}
	}
	return rb
}

type backend struct {
	session.Backend
	r *Redactor
}

// Durable implements session.Durable as b's backend does.
func (b *backend) Durable() bool {
	d, ok := b.Backend.(session.Durable)
	return ok && d.Durable()
}

// readerBackend is a backend whose stored sessions can be read without
// writing: what it reads was redacted when it was stored.
type readerBackend struct {
	*backend
	reader session.Reader
}

func (b *readerBackend) Read(id string) (session.Header, []session.Event, bool, error) {
	return b.reader.Read(id)
}

func (b *backend) Create(h session.Header) (session.Persister, error) {
	p, err := b.Backend.Create(h)
	if err != nil {
		return nil, err
	}
	return &persister{Persister: p, r: b.r}, nil
}

func (b *backend) Load(id string) (session.Header, []session.Event, session.Persister, error) {
	h, events, p, err := b.Backend.Load(id)
	if p != nil {
		p = &persister{Persister: p, r: b.r}
	}
	return h, events, p, err
}

type persister struct {
	session.Persister
	r *Redactor
}

// Append stores events, each redacted when its encoding holds a secret.
func (p *persister) Append(events []session.Event) error {
	var out []session.Event // a copy, once an event changes
	for i, e := range events {
		b, err := e.AppendJSON(nil)
		if err != nil || !p.r.holdsKnown(string(b)) {
			continue
		}
		var clean session.Event
		if err := clean.UnmarshalJSON([]byte(p.r.replacer.Replace(string(b)))); err != nil {
			continue // only a "secret" spanning JSON syntax gets here; no credential does
		}
		if out == nil {
			out = slices.Clone(events)
		}
		out[i] = clean
	}
	if out == nil {
		out = events
	}
	return p.Persister.Append(out)
}

// URLSecrets returns the secret parts of a URL: the password of its
// user-info (or the user name when there is no password: a token in user
// position), and the value of every query parameter whose name suggests a
// credential (key, token, secret, password, auth, sig, credential) or
// whose value is at least 16 bytes long. Anything not a URL has none.
func URLSecrets(raw string) []string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil
	}
	var out []string
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw, url.QueryEscape(pw))
		} else if name := u.User.Username(); name != "" {
			out = append(out, name, url.QueryEscape(name))
		}
	}
	for name, values := range u.Query() {
		lower := strings.ToLower(name)
		credential := false
		for _, word := range []string{"key", "token", "secret", "pass", "auth", "sig", "credential"} {
			credential = credential || strings.Contains(lower, word)
		}
		for _, v := range values {
			if credential || len(v) >= 16 {
				out = append(out, v, url.QueryEscape(v))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
