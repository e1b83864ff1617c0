import { MAX_JSON_DEPTH, TOO_DEEP } from '../db/storableText.js';

/**
 * What JSON.parse changes without a word, found in the JSON text itself (once parsed, the value no
 * longer shows what was written): a key given twice in one object (the last value is kept), a
 * number a double cannot hold as written (`1e400` is read as Infinity, which JSON.stringify writes
 * as `null`; `1e-400` as 0; `0.1000000000000000000001` as 0.1; `12345678901234567890` as …7000),
 * and a value nested deeper than MAX_JSON_DEPTH (which JSON.stringify would overflow the stack
 * on). One scanner for every JSON a CRM or a partner writes: a line of JSON Lines, an event's
 * metadata in a file, a jsonb value of the outbox as PostgreSQL prints it.
 */

/** Something JSON.parse hid: `path` names the value concerned, `what` says it of that value. */
export interface HiddenByParse {
  readonly path: string;
  readonly what: string;
}

/** A JSON number, from where the scan stands (text already known to be valid JSON). */
const JSON_NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * Why a whole number past 2^53 is refused. Not only one that was rounded: once parsed, …992 could
 * have been written …993, and the platform's own reader carries no more than a double either.
 */
export const PAST_SAFE_INTEGER =
  'is a whole number past 2^53, which is not carried exactly: write it as a string';

/** The path of `key` inside the value at `path` (`''`: the text's own value, so `key` alone). */
export function childPath(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  if (!/^[A-Za-z_$][\w$]*$/.test(key)) return `${path}[${shortened(JSON.stringify(key))}]`;
  return path === '' ? key : `${path}.${key}`;
}

/** A text shown in a reason, cut to a readable length (PostgreSQL prints 1e400 as 401 digits). */
function shortened(text: string): string {
  return text.length <= 40 ? text : `${text.slice(0, 24)}… (${text.length} characters)`;
}

/**
 * What is wrong with the JSON number written `literal`, or undefined: too large for a double
 * (sent as null), a whole number past 2^53, too small for one (sent as 0), or a value the double
 * nearest to it does not equal (more significant digits than a double holds). A number written
 * otherwise but worth the same (`1.50`, `1E2`, `-0`, PostgreSQL's plain digits for `1e21`) is
 * carried exactly.
 */
function inexactNumber(literal: string): string | undefined {
  // Most numbers: a whole number of up to 15 digits is a double exactly.
  if (/^-?\d{1,15}$/.test(literal)) return undefined;
  const value = Number(literal);
  const carried = Number.isFinite(value) && (!Number.isInteger(value) || Number.isSafeInteger(value));
  if (carried && decimalOf(JSON.stringify(value)) === decimalOf(literal)) return undefined;
  const written = shortened(literal);
  if (!Number.isFinite(value)) {
    return `is ${written}, a number too large to be carried (it would be sent as null): write it as a string`;
  }
  if (Number.isInteger(value) && !Number.isSafeInteger(value)) return PAST_SAFE_INTEGER;
  if (value === 0) {
    return `is ${written}, a number too small to be carried (it would be sent as 0): write it as a string`;
  }
  return `is ${written}, a number with more digits than can be carried (it would be sent as ${JSON.stringify(value)}): write it as a string`;
}

/**
 * A JSON number's decimal value in one spelling: its significant digits and exponent, so that
 * `1.50`, `15e-1` and `0.15E1` compare equal. Zero has no sign (JSON.stringify(-0) is `0`, the
 * same value). The exponent is a bigint: a literal's own may have any number of digits.
 */
function decimalOf(json: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(json);
  if (match === null) return json;
  const [, sign = '', whole = '', fraction = '', exponent = '0'] = match;
  const digits = `${whole}${fraction}`.replace(/^0+/, '');
  if (digits === '') return '0';
  const significant = digits.replace(/0+$/, '');
  const shift = BigInt(exponent) - BigInt(fraction.length) + BigInt(digits.length - significant.length);
  return `${sign}${significant}e${shift}`;
}

/** An open object or array of the scan: the key or index it is at, and the keys an object gave. */
interface Frame {
  at: string | number;
  readonly keys: Set<string> | undefined;
}

/**
 * What parsing `text` (valid JSON) hides, by the key of the text's own object each is under (for
 * a key given twice there, that key), the first under each, in the order written; paths start at
 * `root` (`''`: the keys alone). Empty for almost every text. A scan with a stack of its own, from
 * one token to the next, jumping over strings: a value nested thousands deep gets its answer too,
 * and a path is built only for what is found.
 */
export function hiddenByParse(text: string, root = ''): Map<string, HiddenByParse> {
  const found = new Map<string, HiddenByParse>();
  const open: Frame[] = [];
  const pathOf = (frames: readonly Frame[]) =>
    frames.reduce((path, frame) => childPath(path, frame.at), root);
  const flag = (top: string, path: () => string, what: string) => {
    if (!found.has(top)) found.set(top, { path: path(), what });
  };
  let expectingKey = false;
  for (let i = 0; i < text.length; ) {
    const c = text[i]!;
    if (c === '{' || c === '[') {
      open.push({ at: c === '{' ? '' : 0, keys: c === '{' ? new Set() : undefined });
      expectingKey = c === '{';
      if (open.length - 1 > MAX_JSON_DEPTH)
        flag(String(open[0]!.at), () => pathOf(open.slice(0, 1)), TOO_DEEP);
      i++;
    } else if (c === '}' || c === ']') {
      open.pop();
      expectingKey = false;
      i++;
    } else if (c === ',') {
      const top = open.at(-1);
      if (top !== undefined && top.keys === undefined) top.at = (top.at as number) + 1;
      else expectingKey = true;
      i++;
    } else if (c === '"') {
      const end = closingQuote(text, i);
      const frame = open.at(-1);
      if (expectingKey && frame?.keys !== undefined) {
        const quoted = text.slice(i, end + 1);
        const key: string = quoted.includes('\\') ? JSON.parse(quoted) : quoted.slice(1, -1);
        if (frame.keys.has(key)) {
          const within = open.slice(0, -1);
          flag(open.length === 1 ? key : String(open[0]!.at), () => pathOf(within), duplicateKey(key));
        }
        frame.keys.add(key);
        frame.at = key;
        expectingKey = false;
      }
      i = end + 1;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      JSON_NUMBER.lastIndex = i;
      const literal = JSON_NUMBER.exec(text)?.[0] ?? c;
      const what = inexactNumber(literal);
      if (what !== undefined) flag(String(open[0]?.at ?? ''), () => pathOf(open), what);
      i += literal.length;
    } else i++;
  }
  return found;
}

const duplicateKey = (key: string) =>
  `holds the key ${shortened(JSON.stringify(key))} twice, and only its last value would be kept: give each key once`;

/** The first thing parsing `text` (valid JSON) hides, as one sentence from `root`, or undefined. */
export function firstHiddenByParse(text: string, root: string): string | undefined {
  const [first] = hiddenByParse(text, root).values();
  return first === undefined ? undefined : `${first.path} ${first.what}`;
}

/** The index of the quote that closes the JSON string opened at `from`: one not escaped. */
function closingQuote(text: string, from: number): number {
  let at = text.indexOf('"', from + 1);
  for (;;) {
    if (at === -1) return text.length;
    let backslashes = 0;
    while (text[at - 1 - backslashes] === '\\') backslashes++;
    if (backslashes % 2 === 0) return at;
    at = text.indexOf('"', at + 1);
  }
}
