// Verify an ultimate-jobs webhook in a Java receiver (Java 15+, no dependencies).
//
//   try {
//       WebhookVerifier.verifyStandard(List.of(secret), headers, rawBody, 300, null);
//   } catch (WebhookVerifier.InvalidWebhook e) {
//       return 401;
//   }
//   WebhookVerifier.Event event = WebhookVerifier.readEvent(headers, rawBody, "envelope");
//   if ("orders.paid".equals(event.topic())) { /* event.data(): what the app published */ }
//
// `rawBody` is the bytes as received, before any JSON parsing. Run it over the published
// vectors: `javac -d out *.java && java -cp out VerifyVectors ../vectors.json`.

import java.nio.charset.StandardCharsets;
import java.security.KeyFactory;
import java.security.MessageDigest;
import java.security.PublicKey;
import java.security.Signature;
import java.security.spec.X509EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public final class WebhookVerifier {
    public static final long TOLERANCE_S = 300;

    /** The delivery does not verify: do not process it (answer 401). */
    public static final class InvalidWebhook extends Exception {
        public InvalidWebhook(String message) {
            super(message);
        }
    }

    private WebhookVerifier() {}

    private static Map<String, String> lower(Map<String, String> headers) {
        Map<String, String> out = new HashMap<>();
        headers.forEach((k, v) -> out.put(k.toLowerCase(java.util.Locale.ROOT), v));
        return out;
    }

    private static String need(Map<String, String> headers, String name) throws InvalidWebhook {
        String value = headers.get(name);
        if (value == null || value.isEmpty()) throw new InvalidWebhook("missing " + name + " header");
        return value;
    }

    private static long fresh(String timestamp, long toleranceS, Long nowS) throws InvalidWebhook {
        if (!timestamp.matches("[0-9]{1,18}")) throw new InvalidWebhook("bad timestamp");
        long ts = Long.parseLong(timestamp);
        long now = nowS != null ? nowS : System.currentTimeMillis() / 1000;
        if (Math.abs(now - ts) > toleranceS) throw new InvalidWebhook("timestamp outside the tolerance");
        return ts;
    }

    private static byte[] b64(String text) {
        try {
            return Base64.getDecoder().decode(text);
        } catch (IllegalArgumentException e) {
            return new byte[0];
        }
    }

    private static byte[] concat(byte[] head, byte[] body) {
        byte[] out = new byte[head.length + body.length];
        System.arraycopy(head, 0, out, 0, head.length);
        System.arraycopy(body, 0, out, head.length, body.length);
        return out;
    }

    private static byte[] hmac(byte[] key, byte[] content) throws Exception {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(key, "HmacSHA256"));
        return mac.doFinal(content);
    }

    // The DER prefix of an ed25519 SubjectPublicKeyInfo: a whpk_ key is the 32 raw bytes after it.
    private static final byte[] ED25519_SPKI = HexFormat.of().parseHex("302a300506032b6570032100");

    private static boolean ed25519(String publicKey, byte[] content, byte[] signature) {
        byte[] raw = b64(publicKey.substring("whpk_".length()));
        if (raw.length != 32 || signature.length != 64) return false;
        try {
            PublicKey key = KeyFactory.getInstance("Ed25519")
                    .generatePublic(new X509EncodedKeySpec(concat(ED25519_SPKI, raw)));
            Signature verifier = Signature.getInstance("Ed25519");
            verifier.initVerify(key);
            verifier.update(content);
            return verifier.verify(signature);
        } catch (Exception e) {
            return false;
        }
    }

    /** Standard Webhooks: whsec_ secrets verify v1 (HMAC-SHA256), whpk_ keys verify v1a. */
    public static void verifyStandard(
            List<String> secrets, Map<String, String> headers, byte[] body, long toleranceS, Long nowS)
            throws InvalidWebhook {
        Map<String, String> found = lower(headers);
        String id = need(found, "webhook-id");
        long ts = fresh(need(found, "webhook-timestamp"), toleranceS, nowS);
        byte[] content = concat((id + "." + ts + ".").getBytes(StandardCharsets.UTF_8), body);
        for (String entry : need(found, "webhook-signature").split(" ")) {
            int comma = entry.indexOf(',');
            if (comma < 0) continue;
            String version = entry.substring(0, comma);
            byte[] given = b64(entry.substring(comma + 1));
            for (String secret : secrets) {
                boolean asymmetric = secret.startsWith("whpk_") || secret.startsWith("whsk_");
                if (version.equals("v1") && !asymmetric) {
                    byte[] key = b64(secret.startsWith("whsec_") ? secret.substring(6) : secret);
                    try {
                        if (key.length > 0 && MessageDigest.isEqual(hmac(key, content), given)) return;
                    } catch (Exception e) {
                        throw new InvalidWebhook("hmac unavailable: " + e);
                    }
                }
                if (version.equals("v1a") && secret.startsWith("whpk_") && ed25519(secret, content, given)) {
                    return;
                }
            }
        }
        throw new InvalidWebhook("no signature matches");
    }

    /** The x-ultimate-webhook-* scheme: t=<ts>,v1=<hex> over v1:<ts>:<id>:<topic>:<body>. */
    public static void verifyUltimate(
            List<String> secrets, Map<String, String> headers, byte[] body, long toleranceS, Long nowS)
            throws InvalidWebhook {
        Map<String, String> found = lower(headers);
        String id = need(found, "x-ultimate-webhook-id");
        String topic = need(found, "x-ultimate-webhook-topic");
        if (id.contains(":") || topic.contains(":")) throw new InvalidWebhook("':' in the id or topic");
        List<String> stamps = new ArrayList<>();
        List<byte[]> macs = new ArrayList<>();
        for (String part : need(found, "x-ultimate-webhook-signature").split(",")) {
            int eq = part.indexOf('=');
            String key = eq < 0 ? part : part.substring(0, eq);
            String value = eq < 0 ? "" : part.substring(eq + 1);
            if (key.equals("t")) stamps.add(value);
            if (key.equals("v1")) {
                macs.add(value.trim().toLowerCase(java.util.Locale.ROOT).getBytes(StandardCharsets.UTF_8));
            }
        }
        if (stamps.size() != 1 || macs.isEmpty()) throw new InvalidWebhook("bad signature header");
        long ts = fresh(stamps.get(0), toleranceS, nowS);
        byte[] content = concat(("v1:" + ts + ":" + id + ":" + topic + ":").getBytes(StandardCharsets.UTF_8), body);
        for (String secret : secrets) {
            byte[] expected;
            try {
                expected = HexFormat.of()
                        .formatHex(hmac(secret.getBytes(StandardCharsets.UTF_8), content))
                        .getBytes(StandardCharsets.UTF_8);
            } catch (Exception e) {
                throw new InvalidWebhook("hmac unavailable: " + e);
            }
            for (byte[] mac : macs) {
                if (MessageDigest.isEqual(expected, mac)) return;
            }
        }
        throw new InvalidWebhook("no signature matches");
    }

    /** A verified delivery, read: {@code topic} is null when the delivery does not name it (a raw
     *  standard-scheme body); {@code data} is what the app published, as JSON text. */
    public record Event(String id, String topic, String timestamp, String data) {}

    /**
     * Read a delivery you have verified. {@code payload} is what the endpoint was registered
     * with: "envelope" is the Standard Webhooks {"type", "timestamp", "data"}, which ujobs
     * writes in exactly that order and form; "raw" is the published bytes as they are. The
     * x-ultimate scheme names its topic in a header.
     */
    public static Event readEvent(Map<String, String> headers, byte[] body, String payload)
            throws InvalidWebhook {
        Map<String, String> found = lower(headers);
        String text = new String(body, StandardCharsets.UTF_8);
        String topic = found.get("x-ultimate-webhook-topic");
        if (topic != null) return new Event(found.get("x-ultimate-webhook-id"), topic, null, text);
        String id = found.get("webhook-id");
        if (payload.equals("raw")) return new Event(id, null, null, text);
        int[] at = {0};
        expect(text, at, "{\"type\":");
        String type = jsonString(text, at);
        expect(text, at, ",\"timestamp\":");
        String timestamp = jsonString(text, at);
        expect(text, at, ",\"data\":");
        if (!text.endsWith("}") || at[0] > text.length() - 1) throw notEnvelope();
        return new Event(id, type, timestamp, text.substring(at[0], text.length() - 1));
    }

    private static InvalidWebhook notEnvelope() {
        return new InvalidWebhook("not an envelope: {\"type\", \"timestamp\", \"data\"} expected");
    }

    private static void expect(String text, int[] at, String literal) throws InvalidWebhook {
        if (!text.startsWith(literal, at[0])) throw notEnvelope();
        at[0] += literal.length();
    }

    private static String jsonString(String text, int[] at) throws InvalidWebhook {
        if (at[0] >= text.length() || text.charAt(at[0]) != '"') throw notEnvelope();
        StringBuilder out = new StringBuilder();
        int i = at[0] + 1;
        while (i < text.length()) {
            char c = text.charAt(i++);
            if (c == '"') {
                at[0] = i;
                return out.toString();
            }
            if (c != '\\') {
                out.append(c);
                continue;
            }
            if (i >= text.length()) break;
            char e = text.charAt(i++);
            switch (e) {
                case 'n' -> out.append('\n');
                case 't' -> out.append('\t');
                case 'r' -> out.append('\r');
                case 'b' -> out.append('\b');
                case 'f' -> out.append('\f');
                case 'u' -> {
                    if (i + 4 > text.length()) throw notEnvelope();
                    out.append((char) Integer.parseInt(text.substring(i, i + 4), 16));
                    i += 4;
                }
                default -> out.append(e);
            }
        }
        throw notEnvelope();
    }
}
