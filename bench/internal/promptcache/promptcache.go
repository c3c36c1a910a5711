// Package promptcache simulates a model provider's prompt-prefix cache over
// the chat-completions requests of a run and prices them.
//
// A request is rendered as a chat template renders it: its system
// message(s), then the JSON of its tools array, then each remaining message
// (each part as the compact JSON it was sent as), as one byte string; a
// token is taken to be 4 bytes. A request's cache hit is its longest common
// byte prefix with any request answered before it arrived, floored to a
// multiple of 64 tokens (256 bytes), as DeepSeek and OpenAI bill cached
// prefixes in blocks; the rest is a miss. A hit costs a tenth of a miss.
package promptcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"
)

// Pricing and granularity of the simulated cache.
const (
	BytesPerToken = 4   // token estimate: bytes / 4
	BlockTokens   = 64  // hits are floored to a multiple of this many tokens
	HitPrice      = 0.1 // a cached token's price, in full-price tokens
	BlockBytes    = BlockTokens * BytesPerToken
)

// ErrNotChat is returned by Render for a body that is not a JSON object
// with a messages array.
var ErrNotChat = errors.New("promptcache: not a chat-completions request body")

// Render returns the bytes of a chat-completions request body in the order
// a chat template renders them: every system message, the tools array, then
// every other message, each as compact JSON.
func Render(body []byte) ([]byte, error) {
	var req struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    json.RawMessage   `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Messages == nil {
		return nil, ErrNotChat
	}
	var system, rest bytes.Buffer
	for _, m := range req.Messages {
		var head struct {
			Role string `json:"role"`
		}
		if err := json.Unmarshal(m, &head); err != nil {
			return nil, ErrNotChat
		}
		dst := &rest
		if head.Role == "system" {
			dst = &system
		}
		if err := json.Compact(dst, m); err != nil {
			return nil, ErrNotChat
		}
	}
	if len(req.Tools) > 0 && string(req.Tools) != "null" {
		if err := json.Compact(&system, req.Tools); err != nil {
			return nil, ErrNotChat
		}
	}
	system.Write(rest.Bytes())
	return system.Bytes(), nil
}

// CommonPrefix returns the length of the longest common prefix of a and b.
func CommonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+512 <= n && bytes.Equal(a[i:i+512], b[i:i+512]) { // whole blocks first
		i += 512
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// Floor floors a prefix length in bytes to the cache's block size.
func Floor(prefix int) int { return prefix / BlockBytes * BlockBytes }

// Tokens converts bytes to estimated tokens.
func Tokens(n int) float64 { return float64(n) / BytesPerToken }

// Cache holds the renderings of answered requests. It is safe for
// concurrent use.
type Cache struct {
	mu       sync.Mutex
	answered [][]byte
}

// Lookup returns the longest common prefix of r with any request added so
// far, in bytes (not floored).
func (c *Cache) Lookup(r []byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	best := 0
	for _, a := range c.answered {
		best = max(best, CommonPrefix(a, r))
	}
	return best
}

// Add records r as answered: later requests may hit its prefix.
func (c *Cache) Add(r []byte) {
	c.mu.Lock()
	c.answered = append(c.answered, r)
	c.mu.Unlock()
}
