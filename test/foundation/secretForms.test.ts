import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { MIN_SECRET_LENGTH, makeLogger, PATTERN_BUDGET, SecretScrubber } from '../../src/log.js';

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

/** A secret of `length` UTF-16 units drawn from `from` (a character may take two). */
function longSecret(seed: number, length: number, from: readonly string[]): string {
  const next = random(seed);
  let secret = '';
  while (secret.length < length) secret += from[Math.floor(next() * from.length)]!;
  return secret;
}

const LETTERS = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'];
// Long values whose patterns overflowed V8's stack when compiled: 10,000 characters of any kind
// (twice those that need escaping somewhere), 3,000 `"` between letters, 10,000 letters and digits.
const LONG = [
  longSecret(1, 10_000, [...PRINTABLE, ...ODD, ...ODD]),
  longSecret(2, 3_000, LETTERS)
    .split('')
    .map((c) => `"${c}`)
    .join(''),
  longSecret(3, 10_000, LETTERS),
];

/** `forms`, and the secret JSON-escaped three times over. */
const deepForms = (secret: string) => [...forms(secret), jsonEscaped(jsonEscaped(jsonEscaped(secret)))];

/** The JSON line of `secretForms`' second test: the secret as it is, in a URL and in JSON in JSON. */
function jsonLine(secret: string): string {
  const url = encodeURIComponent(secret);
  const body = JSON.stringify({
    body: `pre ${secret} post`,
    url: `https://x/?k=${lowerPercent(url)}&u=${url}`,
  });
  return JSON.stringify({ err: body, nested: JSON.stringify({ err: body }), raw: secret });
}

/** `jsonLine` scrubbed parses back to its shape, the secret redacted in each place, no form of it left. */
function expectScrubbedLine(scrubbed: string, secret: string, label: string): void {
  const parsed = JSON.parse(scrubbed) as { err: string; nested: string; raw: string };
  const inner = JSON.parse(parsed.err) as { body: string; url: string };
  expect(inner.body, label).toBe('pre [REDACTED] post');
  expect(inner.url, label).toBe('https://x/?k=[REDACTED]&u=[REDACTED]');
  expect(parsed.raw, label).toBe('[REDACTED]');
  expect(JSON.parse((JSON.parse(parsed.nested) as { err: string }).err)).toEqual(inner);
  for (const leak of deepForms(secret)) expect(scrubbed.includes(leak), label).toBe(false);
}

describe('SecretScrubber on secrets of thousands of characters', () => {
  it('scrubs every form of each, JSON-escaped up to three times over, without throwing', () => {
    for (const [n, secret] of LONG.entries()) {
      // With ordinary secrets beside it, one of them inside it.
      const inside = [...secret].slice(100, 130).join('');
      const scrubber = new SecretScrubber([secret, 'sk_live_abcdef123456', inside]);
      for (const [f, form] of deepForms(secret).entries()) {
        const scrubbed = scrubber.scrub(`pre ${form} post`);
        expect(scrubbed, `secret ${n}, form ${f}`).toBe('pre [REDACTED] post');
      }
      expect(scrubber.scrub('a key sk_live_abcdef123456 and a line')).toBe('a key [REDACTED] and a line');
    }
  });

  it('keeps JSON valid, a JSON body in a JSON string too, with no form of the secret left', () => {
    for (const [n, secret] of LONG.entries()) {
      expectScrubbedLine(new SecretScrubber([secret]).scrub(jsonLine(secret)), secret, `secret ${n}`);
    }
  });

  it('scrubs values just within the bound of patterns and just beyond it alike', () => {
    for (const length of [PATTERN_BUDGET, PATTERN_BUDGET + 1]) {
      // No character of two units, which the last could cut in two.
      const secret = longSecret(length, length, [...PRINTABLE, ...ODD.filter((c) => c.length === 1)]);
      const scrubber = new SecretScrubber([secret]);
      for (const form of deepForms(secret))
        expect(scrubber.scrub(`pre ${form} post`), `${length}`).toBe('pre [REDACTED] post');
      expectScrubbedLine(scrubber.scrub(jsonLine(secret)), secret, `${length}`);
    }
  });

  it('scrubs each of many secrets, some beyond the budget of patterns, with the others beside it', () => {
    const all = [...secrets(60), ...LONG];
    const scrubber = new SecretScrubber(all);
    for (const secret of all) {
      const scrubbed = scrubber.scrub(jsonLine(secret));
      expect(() => JSON.parse(JSON.parse(JSON.parse(scrubbed).nested).err)).not.toThrow();
      for (const leak of deepForms(secret))
        expect(scrubbed.includes(leak), JSON.stringify(secret)).toBe(false);
    }
  });

  it('lets a logger built with them log as usual, the secrets redacted', () => {
    let out = '';
    const destination = new Writable({
      write(chunk, _encoding, callback) {
        out += chunk.toString();
        callback();
      },
    });
    const log = makeLogger({ level: 'info', scrubber: new SecretScrubber(LONG), destination });
    for (const secret of LONG) {
      log.info({ detail: { said: `bad ${secret}` } }, 'pulled');
      log.error({ err: new Error(`upstream said: ${JSON.stringify({ key: secret })}`) }, 'failed');
    }
    log.info('done');
    const lines = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { msg: string; detail?: { said: string }; err?: { message: string } });
    expect(lines.map((l) => l.msg)).toEqual([...LONG.flatMap(() => ['pulled', 'failed']), 'done']);
    expect(lines[0]!.detail!.said).toBe('bad [REDACTED]');
    expect(lines[1]!.err!.message).toBe('upstream said: {"key":"[REDACTED]"}');
    for (const secret of LONG) for (const leak of deepForms(secret)) expect(out.includes(leak)).toBe(false);
  });
});

/** `run` with `RegExp` (the constructor `new RegExp` finds; literals are not built by it) replaced. */
function withRegExp<T>(replacement: RegExpConstructor, run: () => T): T {
  const original = globalThis.RegExp;
  globalThis.RegExp = replacement;
  try {
    return run();
  } finally {
    globalThis.RegExp = original;
  }
}

describe('SecretScrubber when a pattern fails', () => {
  const some = [...secrets(40), LONG[1]!];
  // V8 parses a pattern when it is built and compiles it at its first use: one too long to compile
  // makes exec throw a SyntaxError ("Stack overflow"), at every use.
  const compileFails = new Proxy(RegExp, {
    construct() {
      throw new SyntaxError('Invalid regular expression: Stack overflow');
    },
  });
  class RunFails extends RegExp {
    override exec(): RegExpExecArray | null {
      throw new SyntaxError('Invalid regular expression: Stack overflow');
    }
  }

  for (const [name, replacement] of [
    ['built', compileFails],
    ['run', RunFails as unknown as RegExpConstructor],
  ] as const) {
    it(`still scrubs every form, never throwing, when one cannot be ${name}`, () => {
      const scrubbed = withRegExp(replacement, () =>
        some.map((secret) => {
          const scrubber = new SecretScrubber([secret]);
          return {
            line: scrubber.scrub(jsonLine(secret)),
            forms: deepForms(secret).map((f) => scrubber.scrub(f)),
          };
        }),
      );
      for (const [n, secret] of some.entries()) {
        expectScrubbedLine(scrubbed[n]!.line, secret, JSON.stringify(secret).slice(0, 80));
        expect(scrubbed[n]!.forms).toEqual(deepForms(secret).map(() => '[REDACTED]'));
      }
    });
  }
});
