import { Writable } from 'node:stream';
import { type Logger, pino } from 'pino';

export type { Logger };

/**
 * The shortest value `SecretScrubber` scrubs: a shorter one would scrub ordinary words, and no
 * real key or secret is that short. Config refuses shorter secrets with this same number.
 */
export const MIN_SECRET_LENGTH = 6;

/**
 * How many times over a secret may be JSON-escaped and still be found: a platform's JSON answer
 * echoing it (1), kept as a string in a JSON error body (2), logged as a JSON line (3).
 */
export const JSON_ESCAPE_DEPTH = 3;

/**
 * How many UTF-16 units of values, together, the scrubber builds regular expressions from: the
 * shortest values first, each whole. The pattern of a value as it is or JSON-escaped once takes
 * some 25 pattern characters for each of its characters, and V8 compiles it (at its first use)
 * recursively along its length: from 2,945 units of `"` or `\n` (6,177 of letters) on, it
 * overflows the stack on Node 20, and every exec throws a SyntaxError. Compiling also takes longer
 * than the units grow (measured: 64 units 5 ms, 512 units 50 to 80 ms, 100 values of 64 units
 * 0.7 s). Real keys and secrets are 32 to 64 units, a database URL (a secret too) some 100: 512
 * takes several, keeps the compiling within 0.1 s, once, and stays 5.7 times below the overflow,
 * room for a scrub called with most of the stack already used. The other values are found
 * without such patterns: see `SecretScrubber`.
 */
export const PATTERN_BUDGET = 512;

/**
 * Values that must never leave the process in a log line. Redaction by path catches the known
 * fields; this catches the same values anywhere else (an error message, a URL, a nested body).
 * Secrets learned at run time (a signing secret read from the database) are added to it.
 *
 * Each value is found as it is and URL-encoded (either case of hex digit, any character encoded
 * or not, `+` for a space), each of them JSON-escaped up to `JSON_ESCAPE_DEPTH` times over: what
 * it scrubs is often JSON (a platform's answer before it is parsed, a log line), where any
 * character may be written as `\uXXXX` and encoders differ in what they escape (PHP `\/`, Go
 * `\u003c`). The replacement takes whole escapes, so scrubbed JSON stays JSON.
 *
 * The values beyond `PATTERN_BUDGET` (the longest, as a value of thousands of units from the
 * platform or the configuration: no real secret is one) are found in the same forms by the matcher
 * that reads the text unit by unit, only their first two characters in a pattern: twice as slow
 * on a page (27 µs against 14 µs), never too long to compile. So is every value, more slowly,
 * should a pattern fail to compile or run anyway: `scrub` never throws for a value, whatever its
 * length, nor returns a text with a value left in it.
 *
 * Scrubber limits: at each place a text begins like a value beyond `PATTERN_BUDGET`, finding it
 * costs as many steps as the text goes on like it, so a text made of many long beginnings of such
 * a value (never one of a real secret) takes the product of the two lengths. Should even the
 * matcher without patterns throw (the stack at its end where `scrub` was called), the whole text
 * is `[REDACTED]`.
 */
export class SecretScrubber {
  readonly #values = new Set<string>();
  // Built on first use after a value was added: one pass over the text for every value.
  #patterns: Patterns | undefined;

  constructor(values: Iterable<string> = []) {
    for (const v of values) this.add(v);
  }

  add(value: string): void {
    if (value.length < MIN_SECRET_LENGTH || this.#values.has(value)) return;
    this.#values.add(value);
    this.#patterns = undefined;
  }

  scrub(text: string): string {
    if (this.#values.size === 0) return text;
    try {
      this.#patterns ??= patternsOf(this.#values);
      return scrubWith(text, this.#patterns);
    } catch {
      // A pattern V8 could not compile or run (none should: see PATTERN_BUDGET). Kept as it was,
      // it would throw again at every call, every log line. From now on every value is found
      // without patterns built from it, in the same forms.
      const every = unpatterned(this.#values);
      this.#patterns = { short: undefined, long: { every, shallow: every }, spaced: true };
      try {
        return scrubForms(text, every);
      } catch {
        // Not even that (the stack already at its end where this was called): nothing of the
        // text, rather than a secret in it.
        return text.endsWith('\n') ? `${REDACTED}\n` : REDACTED;
      }
    }
  }
}

const REDACTED = '[REDACTED]';
const BACKSLASH = 0x5c;
const PERCENT = 0x25;
const PLUS = 0x2b;
const HEX4 = /^[0-9a-fA-F]{4}$/;

function scrubWith(text: string, { short, long, spaced }: Patterns): string {
  // Most texts (an API page, a log line) hold no backslash escaped again and no percent-encoding
  // (nor a `+`, where a value has a space): in them a value can only be as it is or JSON-escaped
  // once, which one regular expression finds some 15 times faster than the matcher of every
  // form (17 µs against 300 µs on a page of 100 reviews).
  const shallow = !text.includes('\\\\') && !text.includes('%') && !(spaced && text.includes('+'));
  // The long values first: whole, they win over a shorter value found inside one. `[REDACTED]`
  // brings no backslash, `%` or `+`: a shallow text stays one.
  const out = long === undefined ? text : scrubForms(text, shallow ? long.shallow : long.every);
  if (short === undefined) return out;
  return shallow ? scrubShallow(out, short.shallow) : scrubForms(out, short);
}

/** Every form of the values of `matcher` in `text` redacted, whole escapes with them. */
function scrubForms(text: string, { starts, alternatives }: Matcher): string {
  let out = '';
  let from = 0;
  // A boundary between JSON escapes (or plain characters) at or after `from`: reading on from
  // there tells whether a match begins inside an escape. Only read when a match is found, and
  // never twice over the same text.
  let boundary = 0;
  for (let start = nextStart(text, 0, starts); start >= 0; ) {
    const matchEnd = matchAt(text, start, alternatives);
    if (matchEnd < 0) {
      start = nextStart(text, start + 1, starts);
      continue;
    }
    let first = start;
    while (boundary < first) {
      const next = boundary + escapeLength(text, boundary);
      if (next > first) break;
      boundary = next;
    }
    // A match inside an escape (`\nsecret`, `\u0041…` with the secret starting at "0041") takes
    // the escape along: left alone, its backslash would escape "[" and break the JSON.
    if (boundary < first) first = boundary;
    else first -= innerEscapeRun(text, first, from);
    let end = first;
    while (end < matchEnd) end += escapeLength(text, end);
    out += `${text.slice(from, first)}${REDACTED}`;
    from = end;
    boundary = end;
    start = nextStart(text, end, starts);
  }
  return from === 0 ? text : out + text.slice(from);
}

/** Where in `text`, at `from` or after it, a match may begin (see `Matcher`), or -1. */
function nextStart(text: string, from: number, starts: RegExp | Set<number>): number {
  if (starts instanceof Set) {
    for (let i = from; i < text.length; i++) if (starts.has(text.charCodeAt(i))) return i;
    return -1;
  }
  // exec, not matchAll: matchAll copies the pattern at every call, which costs more than the
  // search on a short text (a log line).
  starts.lastIndex = from;
  return starts.exec(text)?.index ?? -1;
}

/** The length of the JSON string escape (or plain character) at `text[i]`. */
function escapeLength(text: string, i: number): number {
  if (text.charCodeAt(i) !== BACKSLASH || i + 1 >= text.length) return 1;
  return text[i + 1] === 'u' && HEX4.test(text.slice(i + 2, i + 6)) ? 6 : 2;
}

// What may follow an escape's backslash: `\n`, `\"`, `\\`, `\/`, `\u…`.
const ESCAPE_TAILS = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't', 'u']);

/**
 * How many of the escaped backslashes (`\\` pairs) just before `text[index]` (down to `floor`) to
 * take along with a match there: a text JSON-escaped again doubles each backslash, so 2 of them
 * before "n" are `\n` once unescaped, 4 are `\n` twice unescaped. Taking them keeps each inner
 * JSON valid too.
 */
function innerEscapeRun(text: string, index: number, floor: number): number {
  if (!ESCAPE_TAILS.has(text[index]!)) return 0;
  let i = index;
  while (i > floor && text.charCodeAt(i - 1) === BACKSLASH) i--;
  return (index - i) % 2 ** JSON_ESCAPE_DEPTH;
}

/**
 * The shortest values, up to `PATTERN_BUDGET` units together, with all their patterns; the others
 * with patterns for their first two characters only.
 */
function patternsOf(values: ReadonlySet<string>): Patterns {
  const escapes = new JsonEscapes();
  const short: string[] = [];
  const long: string[] = [];
  let units = 0;
  // Every long value is longer than every short one (or as long): found first, whole, it never
  // takes part of a short one.
  for (const value of [...values].sort((a, b) => a.length - b.length)) {
    units += value.length;
    (units <= PATTERN_BUDGET ? short : long).push(value);
  }
  // The longer value first in `shallow` too: it wins a prefix.
  short.reverse();
  return {
    short:
      short.length === 0
        ? undefined
        : {
            ...patterned(short, escapes),
            shallow: new RegExp(short.map((v) => escapes.asIsOrOnce(v)).join('|'), 'g'),
          },
    long: long.length === 0 ? undefined : patternedLong(long, escapes),
    spaced: [...values].some((v) => v.includes(' ')),
  };
}

/**
 * Long `values` for any text, and for a shallow one (see `scrubWith`): there only as they are or
 * JSON-escaped once, their first two characters found as `shallow` finds short values, which is
 * some 10 times faster than the pattern for every form at every depth.
 */
function patternedLong(values: readonly string[], escapes: JsonEscapes): Patterns['long'] {
  const every = patterned(values, escapes);
  const firstTwo = values.map((v) => escapes.asIsOrOnce(v.slice(0, 2)));
  return {
    every,
    shallow: {
      starts: new RegExp([...new Set(firstTwo)].join('|'), 'g'),
      alternatives: every.alternatives.filter((a) => a.depth <= 1),
    },
  };
}

/** `values` with one pattern for the first two characters of each form at each depth. */
function patterned(values: readonly string[], escapes: JsonEscapes): Matcher {
  const alternatives = alternativesOf(values);
  const starts = new Set(alternatives.map((a) => escapes.source(a.form.slice(0, 2), a.depth)));
  return { starts: new RegExp([...starts].join('|'), 'g'), alternatives };
}

/**
 * `values` with no pattern built from them: a match may begin at any of their first units, or at
 * the `\` of an escape, the `%` of a percent-encoding or the `+` for a space (see `matchUnit`).
 */
function unpatterned(values: ReadonlySet<string>): Matcher {
  const starts = new Set([BACKSLASH, PERCENT, PLUS]);
  for (const value of values) starts.add(value.charCodeAt(0));
  return { starts, alternatives: alternativesOf(values) };
}

/**
 * Every value in each of its forms and depths of JSON escaping, the longer value first (wins a
 * prefix), then the deeper escaping (`x\\\\` wins over `x\\` for a value ending in a backslash).
 */
function alternativesOf(values: Iterable<string>): Alternative[] {
  const alternatives: Alternative[] = [];
  for (const value of values) {
    const forms = [urlForms(value, false)];
    // `%` stays `%25` in the URL-encoded forms: allowing a bare `%` there would make `%25` mean
    // two things. The value as it is (with its bare `%`) is then one more form.
    if (value.includes('%')) forms.push(urlForms(value, true));
    for (const form of forms) {
      for (let depth = 0; depth <= JSON_ESCAPE_DEPTH; depth++)
        alternatives.push({ length: value.length, depth, form, first: value.charCodeAt(0) });
    }
  }
  return alternatives.sort((a, b) => b.length - a.length || b.depth - a.depth);
}

/** `SecretScrubber.scrub` where no value can be escaped twice or URL-encoded: see there. */
function scrubShallow(text: string, pattern: RegExp): string {
  let out = '';
  let from = 0;
  // exec, not matchAll: matchAll copies the pattern at every call, which costs more than the
  // search on a short text (a log line).
  pattern.lastIndex = 0;
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    // A match right after an escape's backslash (`\nsecret`) takes that backslash along: left
    // alone, it would escape "[" and break the JSON. (These texts hold no backslash escaped again.)
    out += `${text.slice(from, match.index - innerEscapeRun(text, match.index, from))}${REDACTED}`;
    from = match.index + match[0].length;
  }
  return from === 0 ? text : out + text.slice(from);
}

/**
 * The values within `PATTERN_BUDGET` (`short`) and the longer ones beyond it (`long`), undefined
 * when there are none.
 */
interface Patterns {
  short: ShortPatterns | undefined;
  /** For any text, and for a shallow one (see `scrubWith`). */
  long: { every: Matcher; shallow: Matcher } | undefined;
  /** Whether a value holds a space, which a URL-encoding may write as `+`. */
  spaced: boolean;
}

/**
 * `starts` finds where a match may begin, fast: a small pattern of the first two characters of
 * every form at every depth, or (see `unpatterned`) the units such a form may begin with. Only
 * there are the alternatives tried, one after the other, each by `matchForm`: a whole pattern for
 * them all would be large, slow to build and slow to run.
 */
interface Matcher {
  starts: RegExp | Set<number>;
  alternatives: Alternative[];
}

interface ShortPatterns extends Matcher {
  /** Every value as it is or JSON-escaped once, for the texts that can hold no other form. */
  shallow: RegExp;
}

interface Alternative {
  length: number;
  depth: number;
  form: Form;
  /** The value's first UTF-16 unit. */
  first: number;
}

/** Where the first alternative found at `text[index]` ends, or -1. */
function matchAt(text: string, index: number, alternatives: readonly Alternative[]): number {
  // A form begins with its value's first unit, or with the `\` of an escape, the `%` of a
  // percent-encoding or the `+` for a space: where the text has another unit, only the values
  // beginning with it are tried (a few, among hundreds of alternatives when there are many values).
  const unit = text.charCodeAt(index);
  const any = unit === BACKSLASH || unit === PERCENT || unit === PLUS;
  for (const { form, depth, first } of alternatives) {
    if (!any && first !== unit) continue;
    const end = matchForm(text, index, form, depth);
    if (end >= 0) return end;
  }
  return -1;
}

/**
 * Where `form` escaped `depth` times over ends if it begins at `text[index]`, or -1. At one depth
 * no way to write a character is a prefix of another (JSON escapes and percent-encoding are
 * prefix codes), so the first way that fits is the only one: no backtracking.
 */
function matchForm(text: string, index: number, form: Form, depth: number): number {
  let i = index;
  for (const ways of form) {
    let next = -1;
    for (const way of ways) {
      next = typeof way === 'string' ? matchUnits(text, i, way, depth) : matchLiteral(text, i, way.literal);
      if (next >= 0) break;
    }
    if (next < 0) return -1;
    i = next;
  }
  return i;
}

function matchUnits(text: string, index: number, units: string, depth: number): number {
  let i = index;
  for (let k = 0; k < units.length && i >= 0; k++) i = matchUnit(text, i, units.charCodeAt(k), depth);
  return i;
}

/** `literal` (upper case) in either case of its letters. */
function matchLiteral(text: string, index: number, literal: string): number {
  return text.slice(index, index + literal.length).toUpperCase() === literal ? index + literal.length : -1;
}

/** Where the UTF-16 unit `code` escaped `depth` times over (see `JsonEscapes`) ends, or -1. */
function matchUnit(text: string, index: number, code: number, depth: number): number {
  if (depth === 0) return text.charCodeAt(index) === code ? index + 1 : -1;
  const bare = code !== QUOTE && code !== BACKSLASH && code >= 0x20;
  if (bare) {
    const end = matchUnit(text, index, code, depth - 1);
    if (end >= 0) return end;
  }
  // The backslash that begins an escape, written by the escapings above as `\\` each time.
  const j = index + 2 ** (depth - 1);
  if (!backslashesAt(text, index, j)) return -1;
  if (code === BACKSLASH && backslashesAt(text, j, j + 2 ** (depth - 1))) return j + 2 ** (depth - 1);
  if (
    text[j] === 'u' &&
    Number.parseInt(text.slice(j + 1, j + 5), 16) === code &&
    HEX4.test(text.slice(j + 1, j + 5))
  ) {
    return j + 5;
  }
  const short = SHORT_ESCAPES[String.fromCharCode(code)];
  if (short === undefined || code === BACKSLASH) return -1;
  if (/[a-z]/.test(short)) return text[j] === short ? j + 1 : -1;
  return matchUnit(text, j, short.charCodeAt(0), depth - 1);
}

function backslashesAt(text: string, from: number, to: number): boolean {
  if (to > text.length) return false;
  for (let i = from; i < to; i++) if (text.charCodeAt(i) !== BACKSLASH) return false;
  return true;
}

const QUOTE = 0x22;

/**
 * A value's forms, character by character (code point): each of the ways to write the character,
 * either the UTF-16 units of the character as it is (each one JSON-escaped as the depth asks) or a
 * literal in either case (percent-encoded bytes, `+` for a space: no JSON encoder escapes `%`,
 * `+`, letters or digits).
 */
type Form = (string | { literal: string })[][];

function urlForms(value: string, barePercent: boolean): Form {
  return [...value].map((char) => {
    const ways: (string | { literal: string })[] = [];
    if (char !== '%' || barePercent) ways.push(char);
    if (char === ' ') ways.push({ literal: '+' });
    if (char !== '%' || !barePercent) {
      let literal = '';
      for (const byte of UTF8.encode(char)) literal += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
      ways.push({ literal });
    }
    return ways;
  });
}

const UTF8 = new TextEncoder();

// JSON's two-character escapes (RFC 8259, 7): the character after the backslash, by the
// character it stands for.
const SHORT_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  '\b': 'b',
  '\f': 'f',
  '\n': 'n',
  '\r': 'r',
  '\t': 't',
};

/**
 * Patterns (for `starts`) for a UTF-16 unit JSON-escaped `depth` times over, as `matchUnit` reads
 * it: each escaping writes each unit of the last as itself (where JSON allows), as `\uXXXX` in
 * either case, or as its short escape; a backslash of the layers below is always written `\\`
 * (every encoder does). So `"` twice over is `\\\"`, `\\u0022` or `\u0022`-escaped once more
 * (`\\\u0022`), and `\` three times over is eight backslashes or `\\\\u005c`. The `u`, the hex
 * digits and the letter of `\n` stay themselves in the layers above. No `u` flag: units, not
 * code points, which is what JSON escapes.
 */
class JsonEscapes {
  readonly #sources = new Map<string, string>();

  /** The pattern for a value's forms (see `urlForms`) escaped `depth` times over. */
  source(form: Form, depth: number): string {
    const way = (w: string | { literal: string }) =>
      typeof w === 'string'
        ? w
            .split('')
            .map((unit) => this.unit(unit, depth))
            .join('')
        : w.literal.replace(/[A-F]/g, (d) => `[${d}${d.toLowerCase()}]`).replace('+', '\\+');
    const char = (ways: Form[number]) =>
      ways.length === 1 ? way(ways[0]!) : `(?:${ways.map(way).join('|')})`;
    return form.map(char).join('');
  }

  /**
   * A pattern for `value` as it is or JSON-escaped once, unit by unit, for the texts where no
   * deeper form can be (see `SecretScrubber.scrub`).
   */
  asIsOrOnce(value: string): string {
    let source = '';
    for (const unit of value.split('')) {
      const once = this.unit(unit, 1);
      // Where JSON allows the unit itself, its pattern at depth 1 already begins with it. A
      // backslash's escapes come before the backslash itself: taken as itself, it would end a
      // match inside the escape it begins.
      source +=
        unit === '"' || unit === '\\' || unit.charCodeAt(0) < 0x20
          ? `(?:${once}|${this.unit(unit, 0)})`
          : once;
    }
    return source;
  }

  unit(unit: string, depth: number): string {
    const key = `${depth}${unit}`;
    let source = this.#sources.get(key);
    if (source === undefined) {
      source = this.#build(unit, depth);
      this.#sources.set(key, source);
    }
    return source;
  }

  #build(unit: string, depth: number): string {
    const code = unit.charCodeAt(0);
    const hex = code.toString(16).padStart(4, '0');
    if (depth === 0) return /^[A-Za-z0-9_]$/.test(unit) ? unit : `\\u${hex}`;
    const u = `u${hex.replace(/[a-f]/g, (d) => `[${d}${d.toUpperCase()}]`)}`;
    // The backslash that begins an escape, written by the escapings above as `\\` each time.
    const backslash = backslashes(depth - 1);
    if (unit === '\\') return `(?:${backslashes(depth)}|${backslash}${u})`;
    const short = SHORT_ESCAPES[unit];
    const tail = short === undefined ? '' : `|${/[a-z]/.test(short) ? short : this.unit(short, depth - 1)}`;
    const escaped = `${backslash}(?:${u}${tail})`;
    // The unit itself first where JSON allows it, the likelier form.
    return unit === '"' || code < 0x20 ? escaped : `(?:${this.unit(unit, depth - 1)}|${escaped})`;
  }
}

/** A backslash escaped `depth` times over with `\\`: 2 ** depth of them. */
const backslashes = (depth: number) => `\\\\{${2 ** depth}}`;

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
