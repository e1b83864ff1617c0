import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { parseEvent } from '../../src/webhooks/event.js';
import { Inbox, statementGroups } from '../../src/webhooks/inbox.js';
import type { Delivery } from '../../src/webhooks/inboxSql.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { makeReview, signedDelivery } from './helpers.js';

const SECRET = 'whsec_large_deliveries_test';

/**
 * A burst of deliveries whose bodies together outgrow one statement, committed together by the
 * receiver's group commit: the receiver took each one, so the batch they make must be stored, not
 * refused whole for its size. At the default budget (16 MiB of bodies a statement) that takes
 * bodies near a large WEBHOOK_MAX_BODY_BYTES: nine of 64 MiB, before the split, made one text
 * longer than a JavaScript string can be and every one was answered 503 (2 GB and a minute to
 * show); here a budget of a few bodies stands in for it, on the same path.
 */
describe('a burst of deliveries too large for one statement, in one group commit', () => {
  const BODY_CHARS = 4_000;
  let db: Db;
  let inbox: Inbox;
  beforeAll(async () => {
    db = await freshDb();
    inbox = new Inbox({ db, log: quietLog, statementBodyChars: 3 * BODY_CHARS });
  });
  afterAll(async () => {
    await inbox?.close();
    await db?.close();
  });

  const delivery = (review: ReturnType<typeof makeReview>) => {
    const { body, headers } = signedDelivery(SECRET, review);
    const parsed = parseEvent(Buffer.from(body), 'review.created');
    if (!parsed.ok) throw new Error(parsed.reason);
    return { event: parsed.event, body, observedAt: new Date(Number(headers['x-ee-timestamp']) * 1000) };
  };

  it('stores every one of them in several statements of one commit, a delivery given twice in the batch once', async () => {
    const reviews = Array.from({ length: 10 }, (_, i) =>
      makeReview({ comment: `${i}`.repeat(BODY_CHARS - 1_000) }),
    );
    const burst = [...reviews.map(delivery), delivery(reviews[3]!)];
    expect(statementGroups(burst, 3 * BODY_CHARS).length).toBeGreaterThan(2);
    // Submitted in one turn of the event loop: one batch.
    const outcomes = await Promise.allSettled(burst.map((d) => inbox.submit(d)));
    expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value : String(o.reason)))).toEqual([
      ...reviews.map(() => 'accepted'),
      'duplicate',
    ]);
    const ids = reviews.map((r) => r.id);
    const stored = await db.knex(db.table('reviews')).whereIn('id', ids).select('id', 'comment');
    expect(new Map(stored.map((r) => [r.id, r.comment]))).toEqual(
      new Map(reviews.map((r) => [r.id, r.comment])),
    );
    const inboxRows = await db.knex(db.table('webhook_inbox')).whereIn('review_id', ids).count({ n: '*' });
    expect(Number(inboxRows[0]!.n)).toBe(ids.length);
  });
});

describe('statementGroups', () => {
  const delivery = (id: string, length: number) =>
    ({ event: { data: { id } }, body: 'x'.repeat(length) }) as unknown as Delivery;

  it('keeps a batch within the budget in one statement, in its own order', () => {
    expect(statementGroups([delivery('b', 3), delivery('a', 3)], 6)).toEqual([[0, 1]]);
  });

  it('splits a larger one in the order of review ids, each statement within the budget or one delivery alone', () => {
    const batch = [delivery('c', 4), delivery('a', 3), delivery('d', 9), delivery('b', 3), delivery('a', 1)];
    // a(3), a(1), b(3) | c(4) | d(9): the same review's deliveries stay in order, side by side.
    expect(statementGroups(batch, 8)).toEqual([[1, 4, 3], [0], [2]]);
  });
});
