import { Writable } from 'node:stream';
import { type Logger, pino } from 'pino';

export type { Logger };

/**
 * Values that must never leave the process in a log line. Redaction by path catches the known
 * fields; this catches the same values anywhere else (an error message, a URL, a nested body).
 * Secrets learned at run time (a signing secret read from the database) are added to it.
 *
 * Each value is found as it is, URL-encoded, and in any JSON string escaping of either: what it
 * scrubs is often JSON (a platform's answer before it is parsed, a log line), where any character
 * may be written as `\uXXXX` and encoders differ in what they escape (PHP `\/`, Go `\u003c`).
 */
export class SecretScrubber {
  readonly #values = new Set<string>();
  // Built on first use after a value was added: one pass over the text for every value.
  #pattern: RegExp | undefined;

  constructor(values: Iterable<string> = []) {
    for (const v of values) this.add(v);
  }

  add(value: string): void {
    // Very short values would scrub ordinary words; no real key or secret is that short.
    if (value.length < 6 || this.#values.has(value)) return;
    this.#values.add(value);
    this.#pattern = undefined;
  }

  scrub(text: string): string {
    if (this.#values.size === 0) return text;
    this.#pattern ??= anyEscapingOf(this.#values);
    const pattern = this.#pattern;
    let out = '';
    let from = 0;
    // exec, not matchAll: matchAll copies the pattern at every call, which costs more than the
    // search on a short text (a log line).
    pattern.lastIndex = 0;
    for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
      // A match right after an escape's backslash (`\nsecret`, `\\u0041…`: the secret escaped
      // twice) takes that backslash along: left alone, it would escape "[" and break the JSON.
      const start = escapedAt(text, match.index, from) ? match.index - 1 : match.index;
      out += `${text.slice(from, start)}${REDACTED}`;
      from = match.index + match[0].length;
    }
    return from === 0 ? text : out + text.slice(from);
  }
}

const REDACTED = '[REDACTED]';

/** Whether `text[index]` follows an odd run of backslashes (down to `floor`): an escape's tail. */
function escapedAt(text: string, index: number, floor: number): boolean {
  let i = index;
  while (i > floor && text.charCodeAt(i - 1) === BACKSLASH) i--;
  return (index - i) % 2 === 1;
}

const BACKSLASH = 0x5c;

/** One global pattern for every value and its URL-encoded form, the longest first (wins a prefix). */
function anyEscapingOf(values: Iterable<string>): RegExp {
  const forms = new Set([...values].flatMap((v) => [v, encodeURIComponent(v)]));
  const sources = [...forms].sort((a, b) => b.length - a.length).map(anyEscapingSource);
  return new RegExp(sources.join('|'), 'g');
}

// JSON's two-character escapes (RFC 8259, 7): the pattern after the backslash, by the character
// it stands for.
const SHORT_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\\\',
  '/': '/',
  '\b': 'b',
  '\f': 'f',
  '\n': 'n',
  '\r': 'r',
  '\t': 't',
};

/**
 * A pattern matching `value` in any JSON escaping: each UTF-16 unit (a character outside the BMP
 * is a surrogate pair in `\uXXXX` form) as itself, as `\uXXXX` in either case, or as its short
 * escape. No `u` flag: units, not code points, which is what JSON escapes.
 */
function anyEscapingSource(value: string): string {
  let source = '';
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    const hex = unit.toString(16).padStart(4, '0');
    const anyCase = hex.replace(/[a-f]/g, (d) => `[${d}${d.toUpperCase()}]`);
    const short = SHORT_ESCAPES[value[i]!];
    const escaped = `\\\\u${anyCase}${short === undefined ? '' : `|\\\\${short}`}`;
    // The unit itself first, the likelier form (twice as fast on a page); but a backslash's
    // escapes first: taken as itself, it would end a match inside the escape it begins.
    source += value[i] === '\\' ? `(?:${escaped}|\\u${hex})` : `(?:\\u${hex}|${escaped})`;
  }
  return source;
}

const REDACT_PATHS = [
  'apiKey',
  'key',
  'secret',
  'secrets',
  'signing_secret',
  'signingSecret',
  'headers["x-api-key"]',
  'req.headers["x-api-key"]',
  '*.apiKey',
  '*.secret',
  '*.secrets',
  '*.signing_secret',
  '*.signingSecret',
  '*.headers["x-api-key"]',
];

export interface LoggerOptions {
  level: string;
  scrubber: SecretScrubber;
  /** Where JSON lines go; stdout by default. Tests pass a collector. */
  destination?: NodeJS.WritableStream;
}

export function makeLogger({ level, scrubber, destination = process.stdout }: LoggerOptions): Logger {
  const sink = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      destination.write(scrubber.scrub(chunk.toString()));
      callback();
    },
  });
  return pino(
    {
      level,
      base: { service: 'review-mirror' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    sink,
  );
}
