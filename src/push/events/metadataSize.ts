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
