import { childPath, PAST_SAFE_INTEGER } from '../jsonText.js';

/**
 * The most an event's metadata may weigh, in bytes of JSON text as PostgreSQL prints it: the bound
 * `enqueue_event` applies (migration 015, which holds its own copy of the number), so that a file
 * or the CLI refuses exactly what the function would. A campaign needs ids and names, not
 * documents; the platform's body limit is not published, and 16 KiB keeps the body far below the
 * 100 kB Node servers accept by default.
 */
export const METADATA_MAX_BYTES = 16 * 1024;

/**
 * The size of `value` stored as jsonb and printed as text (`octet_length(metadata::text)`), without
 * building the text: JSON with a space after each colon and comma, and numbers in plain decimal
 * (PostgreSQL's numeric never writes an exponent). Strings are escaped alike by both.
 */
export function jsonTextBytes(value: unknown): number {
  if (typeof value === 'string') return Buffer.byteLength(JSON.stringify(value));
  if (typeof value === 'number') return plainNumberLength(JSON.stringify(value));
  if (value === null || typeof value !== 'object') return String(value).length;
  const entries = Array.isArray(value)
    ? value.map((v) => jsonTextBytes(v))
    : Object.entries(value).map(([k, v]) => Buffer.byteLength(JSON.stringify(k)) + 2 + jsonTextBytes(v));
  // The brackets, and ", " between the entries.
  return 2 + entries.reduce((sum, n) => sum + n, 0) + Math.max(0, entries.length - 1) * 2;
}

/** The length of a JSON number once numeric has read it: `1e+21` is printed as 22 digits, `1e-7` as 0.0000001. */
function plainNumberLength(json: string): number {
  const match = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(json);
  if (match === null) return json.length;
  const [, sign = '', , fraction = '', exponentText = '0'] = match;
  const exponent = Number(exponentText);
  // JSON.stringify writes an exponent only from 1e21 up and below 1e-6: 1.5e+25 is 26 digits,
  // 1.5e-7 is "0.", six zeros and 15.
  return sign.length + (exponent >= 0 ? exponent + 1 : 2 + (-exponent - 1) + 1 + fraction.length);
}

/** How deep metadata may nest: a campaign's ids and names need two or three levels, not thousands. */
export const METADATA_MAX_DEPTH = 32;

/**
 * Why `metadata` cannot be sent as it was written, or undefined: nested deeper than
 * METADATA_MAX_DEPTH (encoders and the platform's parser may overflow their stack on it), holding
 * a whole number past 2^53, which no JSON reader here carries exactly (9007199254740993 arrives as
 * ...992: another matter), or a number JSON has no form for (NaN, Infinity: JSON.stringify writes
 * null). Walked without recursion, so depth cannot overflow it either. What only the JSON text
 * shows (`1e400`, too many digits, a key given twice) is hiddenByParse's (jsonText.ts).
 */
export function unsendableReason(metadata: unknown): string | undefined {
  const pending: Array<{ value: unknown; path: string; depth: number }> = [
    { value: metadata, path: 'metadata', depth: 0 },
  ];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value, path, depth } = next;
    if (typeof value === 'number' && !Number.isFinite(value)) {
      return `${path} is ${value}, a number JSON has no form for (it would be sent as null)`;
    }
    if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value)) {
      return `${path} ${PAST_SAFE_INTEGER}`;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth >= METADATA_MAX_DEPTH) return `metadata is nested more than ${METADATA_MAX_DEPTH} levels deep`;
    for (const [key, child] of Object.entries(value)) {
      pending.push({
        value: child,
        path: childPath(path, Array.isArray(value) ? Number(key) : key),
        depth: depth + 1,
      });
    }
  }
  return undefined;
}
