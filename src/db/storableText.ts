/**
 * PostgreSQL text cannot hold U+0000, and one such record would fail its whole page forever.
 * It becomes U+FFFD (the replacement character): the record is kept and the loss is visible.
 * (A lone UTF-16 surrogate needs nothing here: encoding text to UTF-8 already makes it U+FFFD.)
 */
export function storableText<T extends string | null>(value: T): T {
  // Checked first: almost no text has one, and looking is four times cheaper than replacing.
  return (value === null || !value.includes('\u0000') ? value : value.replaceAll('\u0000', '\uFFFD')) as T;
}

// Half of a character: a high surrogate not followed by a low one, or a low one not preceded by a
// high one. JSON may escape one (`"\ud83d"`, an emoji cut in two by a truncation), and jsonb
// refuses its escape.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Why PostgreSQL could not store `value` as given, text or inside jsonb, or undefined: for input
 * that is refused with its reason rather than altered (a CRM row).
 */
export function unstorableReason(value: string): string | undefined {
  if (value.includes('\u0000')) return 'holds a NUL character (U+0000), which cannot be stored';
  // search, unlike test, ignores the lastIndex a global regular expression keeps between calls.
  if (value.search(LONE_SURROGATE) !== -1) {
    return 'holds half of a character (a lone UTF-16 surrogate), which cannot be stored';
  }
  return undefined;
}

/** Why jsonb would refuse a JSON value (a key or a string it cannot hold, at any depth), or undefined. */
export function unstorableReasonIn(value: unknown): string | undefined {
  if (typeof value === 'string') return unstorableReason(value);
  if (value === null || typeof value !== 'object') return undefined;
  for (const [k, v] of Object.entries(value)) {
    const reason = unstorableReason(k) ?? unstorableReasonIn(v);
    if (reason !== undefined) return reason;
  }
  return undefined;
}

/**
 * JSON text that jsonb accepts, for records kept as the platform sent them: every string, keys
 * too, with U+0000 and lone surrogates as U+FFFD.
 */
export function storableJson(value: unknown): string {
  return JSON.stringify(storableValue(value ?? null));
}

function storableValue(value: unknown): unknown {
  if (typeof value === 'string') return storableString(value);
  if (Array.isArray(value)) return value.map(storableValue);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [storableString(k), storableValue(v)]));
}

function storableString(value: string): string {
  return storableText(value).replace(LONE_SURROGATE, '\uFFFD');
}
