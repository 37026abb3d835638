// Verify an ultimate-jobs webhook in a Node receiver (Node 16+, no dependencies).
//
//   import { verifyStandard, readEvent, InvalidWebhook } from './verify-webhook.mjs';
//   try { verifyStandard(SECRET, req.headers, rawBody); }   // rawBody: the bytes as received
//   catch (e) { if (e instanceof InvalidWebhook) return res.status(401).end(); throw e; }
//   const event = readEvent(req.headers, rawBody);           // after verifying, never before
//   if (event.topic === 'orders.paid') { /* event.data is what the app published */ }
//
// Run it over the published vectors: `node verify-webhook.mjs ../vectors.json`.
import { createHmac, createPublicKey, timingSafeEqual, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export const TOLERANCE_S = 300;

export class InvalidWebhook extends Error {}

const lower = (headers) =>
  Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), String(v)]));

function need(headers, name) {
  const value = headers[name];
  if (!value) throw new InvalidWebhook(`missing ${name} header`);
  return value;
}

function fresh(timestamp, toleranceS, nowS) {
  if (!/^[0-9]+$/.test(timestamp)) throw new InvalidWebhook('bad timestamp');
  const ts = Number(timestamp);
  const now = nowS ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - ts) > toleranceS) throw new InvalidWebhook('timestamp outside the tolerance');
  return ts;
}

function b64(text) {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return Buffer.alloc(0);
  return Buffer.from(text, 'base64');
}

const same = (a, b) => a.length === b.length && a.length > 0 && timingSafeEqual(a, b);
const asList = (secrets) => (Array.isArray(secrets) ? secrets : [secrets]);
const asBytes = (body) => (typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body));

// The DER prefix of an ed25519 SubjectPublicKeyInfo: a whpk_ key is the 32 raw bytes after it.
const ED25519_SPKI = Buffer.from('302a300506032b6570032100', 'hex');

function ed25519(publicKey, content, signature) {
  const raw = b64(publicKey.slice('whpk_'.length));
  if (raw.length !== 32 || signature.length !== 64) return false;
  const key = createPublicKey({ key: Buffer.concat([ED25519_SPKI, raw]), format: 'der', type: 'spki' });
  return verify(null, content, key, signature);
}

export function verifyStandard(secrets, headers, body, toleranceS = TOLERANCE_S, nowS = undefined) {
  const found = lower(headers);
  const id = need(found, 'webhook-id');
  const ts = fresh(need(found, 'webhook-timestamp'), toleranceS, nowS);
  const content = Buffer.concat([Buffer.from(`${id}.${ts}.`, 'utf8'), asBytes(body)]);
  for (const entry of need(found, 'webhook-signature').split(' ')) {
    const comma = entry.indexOf(',');
    if (comma < 0) continue;
    const version = entry.slice(0, comma);
    const given = b64(entry.slice(comma + 1));
    for (const secret of asList(secrets)) {
      const asymmetric = secret.startsWith('whpk_') || secret.startsWith('whsk_');
      if (version === 'v1' && !asymmetric) {
        const key = b64(secret.startsWith('whsec_') ? secret.slice(6) : secret);
        const mac = createHmac('sha256', key).update(content).digest();
        if (key.length > 0 && same(mac, given)) return;
      }
      if (version === 'v1a' && secret.startsWith('whpk_') && ed25519(secret, content, given)) return;
    }
  }
  throw new InvalidWebhook('no signature matches');
}

export function verifyUltimate(secrets, headers, body, toleranceS = TOLERANCE_S, nowS = undefined) {
  const found = lower(headers);
  const id = need(found, 'x-ultimate-webhook-id');
  const topic = need(found, 'x-ultimate-webhook-topic');
  if (id.includes(':') || topic.includes(':')) throw new InvalidWebhook("':' in the id or topic");
  const parts = need(found, 'x-ultimate-webhook-signature').split(',').map((p) => {
    const eq = p.indexOf('=');
    return eq < 0 ? [p, ''] : [p.slice(0, eq), p.slice(eq + 1)];
  });
  const stamps = parts.filter(([k]) => k === 't').map(([, v]) => v);
  const macs = parts.filter(([k]) => k === 'v1').map(([, v]) => Buffer.from(v.trim().toLowerCase()));
  if (stamps.length !== 1 || macs.length === 0) throw new InvalidWebhook('bad signature header');
  const ts = fresh(stamps[0], toleranceS, nowS);
  const content = Buffer.concat([Buffer.from(`v1:${ts}:${id}:${topic}:`, 'utf8'), asBytes(body)]);
  for (const secret of asList(secrets)) {
    const expected = Buffer.from(createHmac('sha256', Buffer.from(secret, 'utf8')).update(content).digest('hex'));
    if (macs.some((mac) => same(expected, mac))) return;
  }
  throw new InvalidWebhook('no signature matches');
}

const parsed = (text) => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

// Read a delivery you have verified: { id, topic, timestamp, data }. `payload` is what the
// endpoint was registered with: 'envelope' (the default) is the Standard Webhooks
// {"type", "timestamp", "data"}; 'raw' is the published bytes as they are (no topic in them:
// topic is null). The x-ultimate scheme names its topic in a header.
export function readEvent(headers, body, payload = 'envelope') {
  const found = lower(headers);
  const text = asBytes(body).toString('utf8');
  if ('x-ultimate-webhook-topic' in found) {
    return {
      id: found['x-ultimate-webhook-id'] ?? '',
      topic: found['x-ultimate-webhook-topic'],
      timestamp: null,
      data: parsed(text),
    };
  }
  const id = found['webhook-id'] ?? '';
  if (payload === 'raw') return { id, topic: null, timestamp: null, data: parsed(text) };
  const envelope = JSON.parse(text);
  if (envelope === null || typeof envelope !== 'object' || typeof envelope.type !== 'string') {
    throw new InvalidWebhook('not an envelope: {"type", "timestamp", "data"} expected');
  }
  return { id, topic: envelope.type, timestamp: envelope.timestamp ?? null, data: envelope.data };
}

function runVectors(path) {
  const vectors = JSON.parse(readFileSync(path, 'utf8'));
  let failures = 0;
  for (const [scheme, check] of [['standard', verifyStandard], ['ultimate', verifyUltimate]]) {
    for (const c of vectors[scheme]) {
      let valid = true;
      try {
        check(c.secrets, c.headers, c.body, c.tolerance, c.now);
      } catch (e) {
        if (!(e instanceof InvalidWebhook)) throw e;
        valid = false;
      }
      let ok = valid === c.valid;
      if (ok && valid && 'topic' in c) ok = readEvent(c.headers, c.body, c.payload).topic === c.topic;
      if (!ok) failures += 1;
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${scheme}: ${c.name}`);
    }
  }
  return failures ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exit(runVectors(process.argv[2]));
}
