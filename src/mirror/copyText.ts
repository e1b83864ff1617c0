const NEEDS_ESCAPE = /[\\\t\n\r]/;
const ESCAPED = /[\\\t\n\r]/g;
const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/**
 * A value as one field of COPY's text format: `\N` for null, and the characters that format gives
 * a meaning (backslash, the tab between fields, the newline and carriage return between rows)
 * escaped, so any text arrives as it was. The text `\N` itself becomes `\\N`, never a null.
 */
export function copyField(value: string | null): string {
  if (value === null) return '\\N';
  // Checked first: almost no text has one, and looking is cheaper than replacing.
  return NEEDS_ESCAPE.test(value) ? value.replace(ESCAPED, (c) => ESCAPES[c]!) : value;
}
