import { randomUUID } from 'node:crypto';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import type { Review } from '../../src/partner-api/reviewsSchema.js';
import { deliveryHeaders } from '../../src/webhooks/signature.js';

/** A valid review of the platform's shape. */
export function makeReview(over: Partial<Review> = {}): Review {
  const id = over.id ?? randomUUID();
  return {
    id,
    review_number: `R-${id.replaceAll('-', '').slice(0, 8).toUpperCase()}`,
    created_at: '2026-11-01T10:00:00.000Z',
    rating: 4.5,
    comment: 'Très bien 👍',
    is_verified: true,
    reviewer: { name: 'Zoë', email: 'zoe@example.com' },
    professional: null,
    ...over,
  };
}

export interface SignedDelivery {
  headers: Record<string, string>;
  body: string;
}

/** A delivery exactly as the platform sends it (spec 6.2), signed with `secret`. */
export function signedDelivery(
  secret: string,
  review: Review,
  options: { timestamp?: number; eventTimestamp?: number } = {},
): SignedDelivery {
  const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
  const body = JSON.stringify({
    event: 'review.created',
    timestamp: String(options.eventTimestamp ?? timestamp),
    data: review,
  });
  return {
    body,
    headers: deliveryHeaders(secret, timestamp, body),
  };
}

const NOT_DELETED = /^duplicate webhook for WEBHOOK_PUBLIC_URL not deleted/;

/**
 * A logger at debug whose lines the test reads, with a scrubber of its own that knows no secret:
 * `notDeleted()` gives the lines saying a duplicate webhook was not deleted.
 */
export function notDeletedLog() {
  const lines: Array<{ level: string; msg: string; webhookId?: string; err?: string }> = [];
  const destination = { write: (line: string) => lines.push(JSON.parse(line)) };
  const log = makeLogger({
    level: 'debug',
    scrubber: new SecretScrubber(),
    destination: destination as unknown as NodeJS.WritableStream,
  });
  return { log, notDeleted: () => lines.filter((l) => NOT_DELETED.test(l.msg)) };
}
