const NEEDS_ESCAPE = /["\\]/;
const ESCAPED = /["\\]/g;

/**
 * A PostgreSQL array literal (`{"a","b",NULL}`) of `values`, for a `?::type[]` parameter. pg
 * encodes a JS array element by element (a type check, an escape and a quoted copy of each, dates
 * formatted in local time) and knex walks it looking for undefined: for the eleven columns of a
 * thousand reviews that cost more client CPU than the server's insert. Every element is quoted, so
 * any text is safe (braces, commas, spaces, the word NULL); only null is NULL. One join makes a
 * flat string, which the driver copies to the socket in one pass.
 */
export function arrayLiteral(values: ReadonlyArray<string | null>): string {
  return arrayLiteralOf(values, (value) => value);
}

/** The array literal of `text(item)` for each of `items`: one pass, no array of texts in between. */
export function arrayLiteralOf<T>(items: readonly T[], text: (item: T) => string | null): string {
  const elements = new Array<string>(items.length);
  for (let i = 0; i < items.length; i++) {
    const value = text(items[i]!);
    elements[i] =
      value === null
        ? 'NULL'
        : NEEDS_ESCAPE.test(value)
          ? `"${value.replace(ESCAPED, '\\$&')}"`
          : `"${value}"`;
  }
  return `{${elements.join(',')}}`;
}
