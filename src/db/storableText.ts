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

/**
 * How deep a JSON value read from input (an event's metadata, a JSON Lines field) may nest: far
 * more than any CRM writes, and far less than what makes a recursive walk of it (JSON.stringify,
 * a size count) overflow the stack and fail a whole file instead of one record.
 */
export const MAX_JSON_DEPTH = 100;

/** The reason a value nested deeper than MAX_JSON_DEPTH is refused, shared by every reader. */
export const TOO_DEEP = `is nested more than ${MAX_JSON_DEPTH} levels deep`;

/**
 * Why jsonb would refuse a JSON value (a key or a string it cannot hold, at any depth), or why it
 * is refused as input (nested deeper than MAX_JSON_DEPTH), or undefined. Walked with a stack of its
 * own, not by recursion: a value thousands deep gets its reason like any other.
 */
export function unstorableReasonIn(value: unknown): string | undefined {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (typeof next.value === 'string') {
      const reason = unstorableReason(next.value);
      if (reason !== undefined) return reason;
      continue;
    }
    if (next.value === null || typeof next.value !== 'object') continue;
    const depth = next.depth + 1;
    if (depth > MAX_JSON_DEPTH) return TOO_DEEP;
    // Pushed last first, so the first reason found is the first in the text, as before.
    const entries = Object.entries(next.value);
    for (const [k] of entries) {
      const reason = unstorableReason(k);
      if (reason !== undefined) return reason;
    }
    for (let i = entries.length - 1; i >= 0; i--) pending.push({ value: entries[i]![1], depth });
  }
  return undefined;
}

/** What is kept of a value nested deeper than MAX_JSON_DEPTH in a record kept as it was sent. */
export const DEEPER_NOT_KEPT = `[${TOO_DEEP}: not kept]`;

/**
 * JSON text that jsonb accepts, for records kept as the platform sent them: every string, keys
 * too, with U+0000 and lone surrogates as U+FFFD; what is nested deeper than MAX_JSON_DEPTH as
 * DEEPER_NOT_KEPT. JSON.parse reads an answer nested thousands deep, but walking it (this, or
 * JSON.stringify) would overflow the stack: the sync would fail on that one record every run.
 */
export function storableJson(value: unknown): string {
  return JSON.stringify(storableValue(value ?? null, 0));
}

function storableValue(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return storableString(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_JSON_DEPTH) return DEEPER_NOT_KEPT;
  if (Array.isArray(value)) return value.map((v) => storableValue(v, depth + 1));
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [storableString(k), storableValue(v, depth + 1)]),
  );
}

function storableString(value: string): string {
  return storableText(value).replace(LONE_SURROGATE, '\uFFFD');
}
