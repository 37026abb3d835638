package webhookverify

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"testing"
)

type vector struct {
	Name      string            `json:"name"`
	Secrets   []string          `json:"secrets"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
	Now       int64             `json:"now"`
	Tolerance int64             `json:"tolerance"`
	Valid     bool              `json:"valid"`
	Payload   string            `json:"payload"`
	Topic     *string           `json:"topic"`
	Reads     bool              `json:"-"`
}

// TestVectors runs both verifiers over ../vectors.json (or $VECTORS).
func TestVectors(t *testing.T) {
	path := os.Getenv("VECTORS")
	if path == "" {
		path = "../vectors.json"
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vectors map[string]json.RawMessage
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	checks := map[string]func([]string, http.Header, []byte, int64, *int64) error{
		"standard": VerifyStandard,
		"ultimate": VerifyUltimate,
	}
	for _, scheme := range []string{"standard", "ultimate"} {
		var cases []vector
		if err := json.Unmarshal(vectors[scheme], &cases); err != nil {
			t.Fatal(err)
		}
		var shapes []map[string]json.RawMessage
		if err := json.Unmarshal(vectors[scheme], &shapes); err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			_, c.Reads = shapes[i]["topic"]
			h := http.Header{}
			for k, v := range c.Headers {
				h.Set(k, v)
			}
			now := c.Now
			err := checks[scheme](c.Secrets, h, []byte(c.Body), c.Tolerance, &now)
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s: %s: unexpected error %v", scheme, c.Name, err)
			}
			ok := (err == nil) == c.Valid
			if ok && err == nil && c.Reads {
				want := ""
				if c.Topic != nil {
					want = *c.Topic
				}
				event, readErr := ReadEvent(h, []byte(c.Body), c.Payload)
				ok = readErr == nil && event.Topic == want
			}
			if !ok {
				t.Errorf("FAIL %s: %s: valid=%v, verifier said %v", scheme, c.Name, c.Valid, err)
			} else {
				t.Logf("ok   %s: %s", scheme, c.Name)
			}
		}
	}
}
