import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import type { Review } from '../../src/partner-api/reviewsSchema.js';
import { parseEvent } from '../../src/webhooks/event.js';
import { Inbox, InboxTimeoutError } from '../../src/webhooks/inbox.js';
import { freshDb, POSTGRES_URL } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { waitFor } from '../helpers/wait.js';
import { makeReview, signedDelivery } from './helpers.js';

/** A delivery as the receiver hands it to the inbox once verified and parsed. */
function delivery(review: Review) {
  const { body } = signedDelivery('whsec_inbox_overlap', review);
  const parsed = parseEvent(Buffer.from(body));
  if (!parsed.ok) throw new Error(parsed.detail);
  return { event: parsed.event, body, observedAt: new Date() };
}

// Two commits at once need two server connections: a PostgreSQL server, not the embedded database.
describe('webhook inbox: a stalled commit does not hold the deliveries behind it', () => {
  let db: Db;
  let inbox: Inbox;

  beforeAll(async () => {
    db = await freshDb({ url: POSTGRES_URL });
    inbox = new Inbox({ db, log: quietLog });
  });
  afterAll(async () => {
    await inbox?.close();
    await db?.close();
  });

  const stored = async (id: string) =>
    Number((await db.knex(db.table('webhook_inbox')).where({ review_id: id }).count({ n: '*' }))[0]!.n);
  const lockWaits = async () => {
    const { rows } = await db.knex.raw(
      `select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`,
    );
    return (rows as Array<{ n: number }>)[0]!.n;
  };

  it('commits a later delivery beside the stalled commit, and the stalled one once it can go on', async () => {
    const stalledReview = makeReview();
    const blocker = await db.knex.transaction();
    let first: Promise<string> | undefined;
    try {
      // An uncommitted row with the first delivery's key: its insert waits for this transaction,
      // as a commit waits on a stalled fsync.
      await blocker(db.table('webhook_inbox')).insert({
        review_id: stalledReview.id,
        event: 'review.created',
        event_at: new Date(),
        body: '{}',
      });
      let firstSettled = false;
      first = inbox.submit(delivery(stalledReview)).finally(() => {
        firstSettled = true;
      });
      await waitFor(async () => (await lockWaits()) > 0);

      const later = makeReview();
      expect(await inbox.submit(delivery(later))).toBe('accepted');
      expect(await stored(later.id)).toBe(1);
      expect(firstSettled).toBe(false);
    } finally {
      await blocker.rollback();
    }
    expect(await first).toBe('accepted');
    expect(await stored(stalledReview.id)).toBe(1);
  });
  it('answers 503 within the commit timeout a delivery queued behind two stalled commits', async () => {
    const timeoutMs = 1_000;
    const bounded = new Inbox({ db, log: quietLog, commitTimeoutMs: timeoutMs });
    const [a, b, c] = [makeReview(), makeReview(), makeReview()];
    const blocker = await db.knex.transaction();
    const ahead: Array<Promise<unknown>> = [];
    try {
      // Every commit stalls: uncommitted rows with the deliveries' keys.
      for (const r of [a, b, c]) {
        await blocker(db.table('webhook_inbox')).insert({
          review_id: r.id,
          event: 'review.created',
          event_at: new Date(),
          body: '{}',
        });
      }
      ahead.push(bounded.submit(delivery(a)).catch((error: unknown) => error));
      await waitFor(async () => (await lockWaits()) >= 1);
      ahead.push(bounded.submit(delivery(b)).catch((error: unknown) => error));
      await waitFor(async () => (await lockWaits()) >= 2);

      const submittedMs = performance.now();
      await expect(bounded.submit(delivery(c))).rejects.toBeInstanceOf(InboxTimeoutError);
      // Not the first stalled commit's timeout and then a whole one of its own (docs/operations.md).
      // (About 1.9 s before, with a timeout of 1 s.)
      expect(performance.now() - submittedMs).toBeLessThan(timeoutMs * 1.6);
    } finally {
      await blocker.rollback();
      await Promise.all(ahead);
      await bounded.close();
    }
  });
});
