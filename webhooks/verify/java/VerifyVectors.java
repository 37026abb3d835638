// Runs WebhookVerifier over ../vectors.json; prints one line per case, exits 1 on a mismatch.
// Holds a minimal JSON reader so the kit needs no dependency.

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public final class VerifyVectors {
    private final String text;
    private int at;

    private VerifyVectors(String text) {
        this.text = text;
    }

    private void skip() {
        while (at < text.length() && Character.isWhitespace(text.charAt(at))) at++;
    }

    private Object value() {
        skip();
        char c = text.charAt(at);
        if (c == '{') {
            Map<String, Object> map = new LinkedHashMap<>();
            at++;
            skip();
            if (text.charAt(at) == '}') { at++; return map; }
            while (true) {
                String key = string();
                skip();
                at++; // ':'
                map.put(key, value());
                skip();
                if (text.charAt(at++) == '}') return map;
            }
        }
        if (c == '[') {
            List<Object> list = new ArrayList<>();
            at++;
            skip();
            if (text.charAt(at) == ']') { at++; return list; }
            while (true) {
                list.add(value());
                skip();
                if (text.charAt(at++) == ']') return list;
            }
        }
        if (c == '"') return string();
        if (text.startsWith("true", at)) { at += 4; return Boolean.TRUE; }
        if (text.startsWith("false", at)) { at += 5; return Boolean.FALSE; }
        if (text.startsWith("null", at)) { at += 4; return null; }
        int start = at;
        while (at < text.length() && "-0123456789.eE+".indexOf(text.charAt(at)) >= 0) at++;
        return Long.parseLong(text.substring(start, at));
    }

    private String string() {
        skip();
        at++; // opening quote
        StringBuilder out = new StringBuilder();
        while (true) {
            char c = text.charAt(at++);
            if (c == '"') return out.toString();
            if (c != '\\') { out.append(c); continue; }
            char e = text.charAt(at++);
            switch (e) {
                case 'n' -> out.append('\n');
                case 't' -> out.append('\t');
                case 'r' -> out.append('\r');
                case 'b' -> out.append('\b');
                case 'f' -> out.append('\f');
                case 'u' -> { out.append((char) Integer.parseInt(text.substring(at, at + 4), 16)); at += 4; }
                default -> out.append(e);
            }
        }
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        String json = Files.readString(Path.of(args[0]), StandardCharsets.UTF_8);
        Map<String, Object> vectors = (Map<String, Object>) new VerifyVectors(json).value();
        int failures = 0;
        for (String scheme : List.of("standard", "ultimate")) {
            for (Object item : (List<Object>) vectors.get(scheme)) {
                Map<String, Object> c = (Map<String, Object>) item;
                List<String> secrets = new ArrayList<>();
                for (Object s : (List<Object>) c.get("secrets")) secrets.add((String) s);
                Map<String, String> headers = new LinkedHashMap<>();
                ((Map<String, Object>) c.get("headers")).forEach((k, v) -> headers.put(k, (String) v));
                byte[] body = ((String) c.get("body")).getBytes(StandardCharsets.UTF_8);
                long tolerance = (Long) c.get("tolerance");
                Long now = (Long) c.get("now");
                boolean valid = true;
                try {
                    if (scheme.equals("standard")) {
                        WebhookVerifier.verifyStandard(secrets, headers, body, tolerance, now);
                    } else {
                        WebhookVerifier.verifyUltimate(secrets, headers, body, tolerance, now);
                    }
                } catch (WebhookVerifier.InvalidWebhook e) {
                    valid = false;
                }
                boolean ok = valid == (Boolean) c.get("valid");
                if (ok && valid && c.containsKey("topic")) {
                    String topic = WebhookVerifier.readEvent(headers, body, (String) c.get("payload")).topic();
                    ok = java.util.Objects.equals(topic, c.get("topic"));
                }
                if (!ok) failures++;
                System.out.println((ok ? "ok   " : "FAIL ") + scheme + ": " + c.get("name"));
            }
        }
        System.exit(failures == 0 ? 0 : 1);
    }
}
