import { z } from 'zod';
import { canonicalReview } from '../partner-api/canonicalReview.js';
import { reviewSchema } from '../partner-api/reviewsSchema.js';
import { strictUtf8 } from '../strictUtf8.js';

/**
 * The body of a delivery (spec 6.2). Strict about what we store, lenient about extra fields, like
 * every other payload we receive.
 */
export const REVIEW_CREATED = 'review.created';

export const reviewCreatedEventSchema = z.object({
  event: z.literal(REVIEW_CREATED),
  // Never refused for its `timestamp`: only the signed X-EE-Timestamp is held to the tolerance. A
  // platform that keeps a delivery's body and signs each retry anew sends one that lags the header
  // by the retry's delay; refused, the retries would all fail. It may date the version (versionTime).
  timestamp: z.unknown().optional(),
  data: reviewSchema,
});
export type ReviewCreatedEvent = z.infer<typeof reviewCreatedEventSchema>;

export type ParseEventResult =
  | { readonly ok: true; readonly event: ReviewCreatedEvent }
  | { readonly ok: false; readonly reason: 'invalid_json' | 'invalid_event'; readonly detail: string }
  /** Another kind of event (spec 6.1 lists one, the platform may add more): nothing to store. */
  | {
      readonly ok: false;
      readonly reason: 'ignored_event_type';
      readonly eventType: string;
      readonly detail: string;
    };

/**
 * Parses the raw bytes of an already verified delivery. Its type is the body's `event` (signed)
 * when that is text, else `headerType` (X-EE-Event, unsigned): a type other than review.created is
 * told apart from a broken review.created, since no retry of it can ever be stored.
 */
export function parseEvent(body: Buffer, headerType?: string): ParseEventResult {
  // The bytes signed and stored keep a leading byte order mark; the text read drops it.
  const text = strictUtf8(body);
  // Decoded otherwise, the text stored would no longer be the bytes signed: refused whatever the
  // type, as JSON between systems is UTF-8 (RFC 8259 §8.1).
  if (text === undefined) return { ok: false, reason: 'invalid_json', detail: 'body is not UTF-8' };
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    if (headerType !== undefined && headerType !== REVIEW_CREATED) {
      return ignored(headerType);
    }
    return { ok: false, reason: 'invalid_json', detail: 'body is not JSON' };
  }
  const bodyType = (json as { event?: unknown } | null)?.event;
  const eventType = typeof bodyType === 'string' ? bodyType : headerType;
  if (eventType !== undefined && eventType !== REVIEW_CREATED) {
    return ignored(eventType);
  }
  const canonical = canonicalEvent(json);
  if (canonical !== undefined) return { ok: true, event: canonical };
  const result = reviewCreatedEventSchema.safeParse(json);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    return {
      ok: false,
      reason: 'invalid_event',
      detail: `${issue.path.join('.') || 'body'}: ${issue.message}`,
    };
  }
  return { ok: true, event: result.data };
}

/**
 * X-EE-Event as one type: Node joins a repeated header with commas, and an empty value names none.
 * Undefined when no type is left; else the first that is not review.created, so that one
 * contradicting value is seen.
 */
export function headerEventType(value: string | string[] | undefined): string | undefined {
  const types = [value ?? []]
    .flat()
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '');
  if (types.length === 0) return undefined;
  return types.find((type) => type !== REVIEW_CREATED) ?? REVIEW_CREATED;
}

/**
 * A delivery whose review has the spec's form, read as the feed's reviews are (canonicalReview):
 * what reviewCreatedEventSchema would return, at a fraction of its cost. Undefined for any other
 * form, which the schema then reads and explains.
 */
function canonicalEvent(json: unknown): ReviewCreatedEvent | undefined {
  if (typeof json !== 'object' || json === null) return undefined;
  const { event, timestamp, data } = json as { event?: unknown; timestamp?: unknown; data?: unknown };
  if (event !== REVIEW_CREATED) return undefined;
  const review = canonicalReview(data);
  return review === undefined ? undefined : { event, timestamp, data: review };
}

/** How far before its signed time a body's own `timestamp` is still taken to date it. */
const BODY_TIME_WITHIN_SECONDS = 7 * 24 * 3600;

/**
 * When a delivery's version of its review was current, in Unix seconds: no later than its signed
 * time nor its arrival (a fast clock must not outrank the feed's next reading), nor than the
 * body's own `timestamp` (spec 6.2: Unix seconds, as a string) where it says so. A platform that
 * keeps a delivery's body and signs each retry anew (spec 6.4: after 1, 5 and 30 minutes) sends
 * the event's version under a later signed time; dated by that, it overwrote what the feed read
 * in between, and the poll's overlap does not read it again. A body time that is not Unix seconds
 * (milliseconds, text), later than the signed time, or more than a week before it, is not taken.
 */
export function versionTime(signedSeconds: number, arrivedSeconds: number, bodyTimestamp: unknown): number {
  const latest = Math.min(signedSeconds, arrivedSeconds);
  const text = typeof bodyTimestamp === 'number' ? String(bodyTimestamp) : bodyTimestamp;
  if (typeof text !== 'string' || !/^\d{1,11}$/.test(text)) return latest;
  const body = Number(text);
  return body <= signedSeconds && body >= signedSeconds - BODY_TIME_WITHIN_SECONDS
    ? Math.min(body, latest)
    : latest;
}

const ignored = (eventType: string): ParseEventResult => ({
  ok: false,
  reason: 'ignored_event_type',
  eventType,
  detail: `not a ${REVIEW_CREATED} event`,
});
