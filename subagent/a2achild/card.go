package a2achild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
)

// CardPath is where an agent publishes its card, below its base URL.
const CardPath = "/.well-known/agent-card.json"

// maxCard bounds an agent card, in bytes.
const maxCard = 1 << 20

// endpoint is what the provider took from the card: where and how to send.
type endpoint struct {
	agent     string // the card's name
	url       string // the JSON-RPC endpoint
	streaming bool
	// header and prefix say how the credential is sent: "Authorization"
	// and "Bearer ", or an API key header and "".
	header, prefix string
}

// resolve fetches the card from the configured URL and checks that the
// provider can talk to the agent: a JSON-RPC endpoint, and a credential
// when the card requires one.
func (p *Provider) resolve(ctx context.Context, hc *httpClient, token string) (endpoint, error) {
	var errs []error
	for _, at := range cardURLs(p.cfg.URL) {
		card, err := fetchCard(ctx, hc.plain(), at)
		if err != nil {
			if ctx.Err() != nil {
				return endpoint{}, context.Cause(ctx)
			}
			errs = append(errs, err)
			continue
		}
		return p.check(card, at, token)
	}
	return endpoint{}, errors.Join(errs...)
}

// cardURLs are where the card of the agent at raw may be: raw itself when
// it names a .json file, else below raw and below its origin.
func cardURLs(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return []string{raw}
	}
	if strings.HasSuffix(u.Path, ".json") {
		return []string{raw}
	}
	below := strings.TrimSuffix(raw, "/") + CardPath
	origin := u.Scheme + "://" + u.Host + CardPath
	if below == origin {
		return []string{below}
	}
	return []string{below, origin}
}

func fetchCard(ctx context.Context, c *http.Client, at string) (*a2a.AgentCard, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, at, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the agent card: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent card at %s: HTTP %s", at, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCard+1))
	if err != nil {
		return nil, fmt.Errorf("read the agent card at %s: %w", at, err)
	}
	if len(body) > maxCard {
		return nil, fmt.Errorf("the agent card at %s is larger than %d bytes", at, maxCard)
	}
	var card a2a.AgentCard
	if err := json.Unmarshal(body, &card); err != nil {
		return nil, fmt.Errorf("the agent card at %s is not a valid card: %w", at, err)
	}
	return &card, nil
}

// check reads the endpoint and the credential's form from card, fetched
// from at.
func (p *Provider) check(card *a2a.AgentCard, at, token string) (endpoint, error) {
	ep := endpoint{agent: card.Name, streaming: card.Capabilities.Streaming}
	switch {
	case card.URL != "" && (card.PreferredTransport == "" || card.PreferredTransport == a2a.TransportProtocolJSONRPC):
		ep.url = card.URL
	default:
		for _, i := range card.AdditionalInterfaces {
			if i.Transport == a2a.TransportProtocolJSONRPC {
				ep.url = i.URL
				break
			}
		}
	}
	if ep.url == "" {
		return ep, fmt.Errorf("the agent card at %s offers no JSON-RPC endpoint (preferred transport %q)", at, card.PreferredTransport)
	}
	u, err := url.Parse(ep.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ep, fmt.Errorf("the agent card at %s names an invalid endpoint %q", at, ep.url)
	}
	required, err := credentialForm(card, &ep)
	if err != nil {
		return ep, fmt.Errorf("the agent card at %s: %w", at, err)
	}
	switch {
	case required && token == "" && p.cfg.TokenEnv == "":
		return ep, fmt.Errorf("the agent requires a credential (%s): set tokenEnv to the variable that holds it", ep.header)
	case required && token == "":
		return ep, fmt.Errorf("the agent requires a credential (%s), and $%s is empty", ep.header, p.cfg.TokenEnv)
	}
	if token != "" {
		// The card is public: a hostile one must not send the credential
		// to a host of its choosing.
		cu, _ := url.Parse(at)
		if cu == nil || cu.Scheme != u.Scheme || cu.Host != u.Host {
			return ep, fmt.Errorf("the agent card at %s names an endpoint on another origin (%s): refusing to send it the credential", at, u.Scheme+"://"+u.Host)
		}
	}
	return ep, nil
}

// credentialForm sets how ep sends a credential, from the card's security
// schemes, and reports whether the card requires one.
func credentialForm(card *a2a.AgentCard, ep *endpoint) (required bool, err error) {
	ep.header, ep.prefix = "Authorization", "Bearer "
	if len(card.Security) == 0 {
		// Declared but not required: a credential, when configured, goes
		// in the API key header the card names, else as a bearer token.
		for _, s := range card.SecuritySchemes {
			if k, ok := s.(a2a.APIKeySecurityScheme); ok && k.In == a2a.APIKeySecuritySchemeInHeader && k.Name != "" {
				ep.header, ep.prefix = http.CanonicalHeaderKey(k.Name), ""
			}
		}
		return false, nil
	}
	var unsupported []string
	for _, req := range card.Security {
		ok := true
		for name := range req {
			s, found := card.SecuritySchemes[name]
			if !found {
				return true, fmt.Errorf("security names scheme %q, which securitySchemes does not declare", name)
			}
			switch s := s.(type) {
			case a2a.HTTPAuthSecurityScheme:
				if !strings.EqualFold(s.Scheme, "bearer") {
					ok = false
					unsupported = append(unsupported, "http "+s.Scheme)
				}
			case a2a.APIKeySecurityScheme:
				if s.In != a2a.APIKeySecuritySchemeInHeader || s.Name == "" {
					ok = false
					unsupported = append(unsupported, fmt.Sprintf("apiKey in %s", s.In))
				} else {
					ep.header, ep.prefix = http.CanonicalHeaderKey(s.Name), ""
				}
			case a2a.OAuth2SecurityScheme, a2a.OpenIDConnectSecurityScheme:
				// An access token obtained beforehand, sent as a bearer token.
			default:
				ok = false
				unsupported = append(unsupported, fmt.Sprintf("%T", s))
			}
		}
		if ok {
			return true, nil
		}
		ep.header, ep.prefix = "Authorization", "Bearer "
	}
	return true, fmt.Errorf("no supported security requirement (the provider sends a bearer token or an API key header; the card asks for %s)", strings.Join(unsupported, ", "))
}
