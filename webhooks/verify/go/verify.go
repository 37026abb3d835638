// Package webhookverify verifies ultimate-jobs webhooks in a Go receiver (standard library
// only).
//
//	body, _ := io.ReadAll(r.Body) // the bytes as received
//	if err := webhookverify.VerifyStandard([]string{secret}, r.Header, body, 300, nil); err != nil {
//		http.Error(w, "invalid signature", http.StatusUnauthorized)
//		return
//	}
//	event, err := webhookverify.ReadEvent(r.Header, body, "envelope") // after verifying
//	if err == nil && event.Topic == "orders.paid" { /* event.Data: what the app published */ }
//
// Run it over the published vectors: `go test ./...` in this folder.
package webhookverify

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Tolerance is the default freshness window, in seconds, either way.
const Tolerance = 300

// ErrInvalid is wrapped by every refusal: do not process the delivery (answer 401).
var ErrInvalid = errors.New("invalid webhook")

var digits = regexp.MustCompile(`^[0-9]{1,18}$`)

func invalid(reason string) error { return fmt.Errorf("%w: %s", ErrInvalid, reason) }

func need(h http.Header, name string) (string, error) {
	v := h.Get(name)
	if v == "" {
		return "", invalid("missing " + name + " header")
	}
	return v, nil
}

func fresh(timestamp string, tolerance int64, now *int64) (int64, error) {
	if !digits.MatchString(timestamp) {
		return 0, invalid("bad timestamp")
	}
	ts, _ := strconv.ParseInt(timestamp, 10, 64)
	current := time.Now().Unix()
	if now != nil {
		current = *now
	}
	d := current - ts
	if d < 0 {
		d = -d
	}
	if d > tolerance {
		return 0, invalid("timestamp outside the tolerance")
	}
	return ts, nil
}

func b64(text string) []byte {
	out, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil
	}
	return out
}

func mac(key, content []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(content)
	return m.Sum(nil)
}

// VerifyStandard checks Standard Webhooks headers: whsec_ secrets verify v1 (HMAC-SHA256),
// whpk_ public keys verify v1a (ed25519).
func VerifyStandard(secrets []string, h http.Header, body []byte, tolerance int64, now *int64) error {
	id, err := need(h, "webhook-id")
	if err != nil {
		return err
	}
	stamp, err := need(h, "webhook-timestamp")
	if err != nil {
		return err
	}
	ts, err := fresh(stamp, tolerance, now)
	if err != nil {
		return err
	}
	signatures, err := need(h, "webhook-signature")
	if err != nil {
		return err
	}
	content := append([]byte(fmt.Sprintf("%s.%d.", id, ts)), body...)
	for _, entry := range strings.Split(signatures, " ") {
		version, value, found := strings.Cut(entry, ",")
		if !found {
			continue
		}
		given := b64(value)
		for _, secret := range secrets {
			asymmetric := strings.HasPrefix(secret, "whpk_") || strings.HasPrefix(secret, "whsk_")
			if version == "v1" && !asymmetric {
				key := b64(strings.TrimPrefix(secret, "whsec_"))
				if len(key) > 0 && len(given) > 0 && hmac.Equal(mac(key, content), given) {
					return nil
				}
			}
			if version == "v1a" && strings.HasPrefix(secret, "whpk_") {
				raw := b64(strings.TrimPrefix(secret, "whpk_"))
				if len(raw) == ed25519.PublicKeySize && len(given) == ed25519.SignatureSize &&
					ed25519.Verify(ed25519.PublicKey(raw), content, given) {
					return nil
				}
			}
		}
	}
	return invalid("no signature matches")
}

// VerifyUltimate checks the x-ultimate-webhook-* headers: t=<ts>,v1=<hex> over
// v1:<ts>:<id>:<topic>:<body>, keyed by the secret's UTF-8 bytes.
func VerifyUltimate(secrets []string, h http.Header, body []byte, tolerance int64, now *int64) error {
	id, err := need(h, "x-ultimate-webhook-id")
	if err != nil {
		return err
	}
	topic, err := need(h, "x-ultimate-webhook-topic")
	if err != nil {
		return err
	}
	if strings.Contains(id, ":") || strings.Contains(topic, ":") {
		return invalid("':' in the id or topic")
	}
	header, err := need(h, "x-ultimate-webhook-signature")
	if err != nil {
		return err
	}
	var stamps []string
	var macs [][]byte
	for _, part := range strings.Split(header, ",") {
		key, value, _ := strings.Cut(part, "=")
		switch key {
		case "t":
			stamps = append(stamps, value)
		case "v1":
			macs = append(macs, []byte(strings.ToLower(strings.TrimSpace(value))))
		}
	}
	if len(stamps) != 1 || len(macs) == 0 {
		return invalid("bad signature header")
	}
	ts, err := fresh(stamps[0], tolerance, now)
	if err != nil {
		return err
	}
	content := append([]byte(fmt.Sprintf("v1:%d:%s:%s:", ts, id, topic)), body...)
	for _, secret := range secrets {
		expected := []byte(hex.EncodeToString(mac([]byte(secret), content)))
		for _, m := range macs {
			if hmac.Equal(expected, m) {
				return nil
			}
		}
	}
	return invalid("no signature matches")
}

// Event is a verified delivery, read: its id, its topic ("" when the delivery does not name
// it: a raw standard-scheme body), when it was published (the envelope's timestamp; "" for a
// raw body) and what the app published (the JSON, as received).
type Event struct {
	ID        string
	Topic     string
	Timestamp string
	Data      json.RawMessage
}

// ReadEvent reads a delivery you have verified. payload is what the endpoint was registered
// with: "envelope" is the Standard Webhooks {"type", "timestamp", "data"}; "raw" is the
// published bytes as they are. The x-ultimate scheme names its topic in a header.
func ReadEvent(h http.Header, body []byte, payload string) (Event, error) {
	if topic := h.Get("x-ultimate-webhook-topic"); topic != "" {
		return Event{ID: h.Get("x-ultimate-webhook-id"), Topic: topic, Data: body}, nil
	}
	if payload == "raw" {
		return Event{ID: h.Get("webhook-id"), Data: body}, nil
	}
	var envelope struct {
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil || envelope.Type == "" {
		return Event{}, invalid(`not an envelope: {"type", "timestamp", "data"} expected`)
	}
	return Event{
		ID: h.Get("webhook-id"), Topic: envelope.Type, Timestamp: envelope.Timestamp,
		Data: envelope.Data,
	}, nil
}
