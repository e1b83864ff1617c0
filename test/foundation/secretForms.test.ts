import { describe, expect, it } from 'vitest';
import { MIN_SECRET_LENGTH, SecretScrubber } from '../../src/log.js';

/** A small seeded generator (mulberry32): the same secrets on every run. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PRINTABLE = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i));
// The characters that need escaping somewhere, more often than their share of printable ASCII.
const ODD = ['"', '\\', '%', '+', ' ', '/', '&', '=', ':', '@', '$', ',', ';', '?', '#', 'é', '😀', '<'];

function secrets(count: number): string[] {
  const next = random(20261127);
  const pick = (from: readonly string[]) => from[Math.floor(next() * from.length)]!;
  const out = ['=:@ "Z%#!', 'a\\\\"b"c\\d', '%25%2B+ x', 'rm_live_é😀<k3y>'];
  while (out.length < count) {
    const length = MIN_SECRET_LENGTH + Math.floor(next() * 14);
    let secret = '';
    while (secret.length < length) secret += next() < 0.4 ? pick(ODD) : pick(PRINTABLE);
    out.push(secret);
  }
  return out;
}

const jsonEscaped = (text: string) => JSON.stringify(text).slice(1, -1);
const lowerPercent = (text: string) => text.replace(/%[0-9A-F]{2}/g, (p) => p.toLowerCase());

/** Every form of `secret` that must not survive: as it is, JSON-escaped once and twice, URL-encoded. */
function forms(secret: string): string[] {
  const url = encodeURIComponent(secret);
  return [secret, jsonEscaped(secret), jsonEscaped(jsonEscaped(secret)), url, lowerPercent(url)];
}

describe('SecretScrubber on generated secrets', () => {
  const all = secrets(300);

  it('scrubs every form of each secret, and of the same secret in any text', () => {
    for (const secret of all) {
      const scrubber = new SecretScrubber([secret]);
      for (const form of forms(secret)) {
        const scrubbed = scrubber.scrub(`pre ${form} post`);
        for (const leak of forms(secret))
          expect(scrubbed, JSON.stringify({ secret, form })).not.toContain(leak);
      }
    }
  });

  it('keeps JSON valid, a JSON body in a JSON string too, with no form of the secret left', () => {
    for (const secret of all) {
      const scrubber = new SecretScrubber([secret]);
      const url = encodeURIComponent(secret);
      // A platform's JSON answer echoing the secret, logged as a string in a JSON line.
      const body = JSON.stringify({
        body: `pre ${secret} post`,
        url: `https://x/?k=${lowerPercent(url)}&u=${url}`,
      });
      const line = JSON.stringify({ err: body, nested: JSON.stringify({ err: body }), raw: secret });
      const scrubbed = scrubber.scrub(line);
      const parsed = JSON.parse(scrubbed) as { err: string; nested: string };
      const inner = JSON.parse(parsed.err) as { body: string };
      expect(inner.body, JSON.stringify(secret)).toBe('pre [REDACTED] post');
      expect(JSON.parse((JSON.parse(parsed.nested) as { err: string }).err)).toEqual(inner);
      for (const leak of forms(secret)) expect(scrubbed, JSON.stringify(secret)).not.toContain(leak);
    }
  });

  it('keeps a line that holds no secret as it was', () => {
    const scrubber = new SecretScrubber(all);
    const line = JSON.stringify({
      msg: 'pulled page 3 of reviews "ok" \\ / café',
      err: JSON.stringify({ a: 'x\\"y' }),
    });
    expect(scrubber.scrub(line)).toBe(line);
  });

  it('scrubs URL encodings of any encoder: either case, reserved characters bare, + for a space', () => {
    const secret = 'a$&+,;=:@/ b é%';
    const scrubber = new SecretScrubber([secret]);
    for (const form of [
      encodeURIComponent(secret),
      lowerPercent(encodeURIComponent(secret)),
      encodeURI(secret),
      new URLSearchParams({ k: secret }).toString().slice(2),
      'a$&+,;=:@/%20b+%c3%A9%25',
    ]) {
      expect(scrubber.scrub(`?k=${form}&x=1`), form).toBe('?k=[REDACTED]&x=1');
    }
  });

  it('scrubs a secret JSON-escaped one, two and three times over', () => {
    const secret = 'q"u\\o/te\n';
    let text = `pre ${secret} post`;
    for (let depth = 1; depth <= 3; depth++) {
      text = JSON.stringify({ body: text });
      const scrubbed = new SecretScrubber([secret]).scrub(text);
      let body: unknown = JSON.parse(scrubbed);
      for (let d = 1; d < depth; d++) body = JSON.parse((body as { body: string }).body);
      expect((body as { body: string }).body, `depth ${depth}`).toBe('pre [REDACTED] post');
    }
  });
});
