import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { toReviewRow } from '../../src/mirror/reviewRow.js';
import { upsertReviews } from '../../src/mirror/reviewsSql.js';
import { parseEvent } from '../../src/webhooks/event.js';
import { storeDeliveries } from '../../src/webhooks/inboxSql.js';
import { freshDb, POSTGRES_URL } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';
import { makeReview, signedDelivery } from '../webhooks/helpers.js';

/**
 * A poll and a webhook commit writing the same reviews at once, in sessions of the real PostgreSQL
 * server: the newest page of the feed is exactly what the webhooks deliver while the poll reads
 * it. The webhook commit takes its row locks in review-id order; a poll that took them in the
 * feed's order (newest first) could hold one review the commit waits for while waiting for one the
 * commit holds: a deadlock, which PostgreSQL ends after a second by failing one of them (webhooks
 * answered 503 and sent again minutes later, or the poll's run failed). Two other sessions hold
 * the two rows so that each statement is deterministically where the crossing happens.
 */
describe('a poll and a webhook commit upserting the same reviews at once', () => {
  let db: Db;
  const clients: pg.Client[] = [];
  beforeAll(async () => {
    db = await freshDb({ url: POSTGRES_URL });
  });
  afterAll(async () => {
    for (const client of clients) await client.end().catch(() => {});
    await db?.close();
  });

  const holdRow = async (id: string) => {
    const client = new pg.Client(POSTGRES_URL);
    clients.push(client);
    await client.connect();
    await client.query('begin');
    await client.query(`select 1 from ${db.schema}.reviews where id = $1 for update`, [id]);
    return client;
  };
  /** Whether the session of `pid` waits for a lock another session holds. */
  const blocked = async (pid: number | undefined) => {
    if (pid === undefined) return false;
    const { rows } = await db.knex.raw('select cardinality(pg_blocking_pids(?)) > 0 as blocked', [pid]);
    return (rows as Array<{ blocked: boolean }>)[0]!.blocked;
  };

  it('take their row locks in one order, so neither fails as a deadlock', { timeout: 30_000 }, async () => {
    const [first, second] = [randomUUID(), randomUUID()].sort();
    const reviews = [first!, second!].map((id) => makeReview({ id }));
    const observedAt = new Date();
    await upsertReviews(
      db.knex,
      db,
      reviews.map((r) => toReviewRow(r, observedAt)),
      'feed',
    );
    const deliveries = reviews.map((review) => {
      const parsed = parseEvent(
        Buffer.from(signedDelivery('whsec_lock_order', review).body),
        'review.created',
      );
      if (!parsed.ok) throw new Error(parsed.reason);
      return { event: parsed.event, body: signedDelivery('whsec_lock_order', review).body, observedAt };
    });
    const holdsFirst = await holdRow(first!);
    const holdsSecond = await holdRow(second!);

    const pids: { webhook?: number; poll?: number } = {};
    const session = (
      name: 'webhook' | 'poll',
      write: (trx: Parameters<typeof upsertReviews>[0]) => Promise<unknown>,
    ) =>
      db.knex
        .transaction(async (trx) => {
          const { rows } = await trx.raw('select pg_backend_pid() as pid');
          pids[name] = (rows as Array<{ pid: number }>)[0]!.pid;
          await write(trx);
        })
        .then(
          () => 'committed',
          (error: unknown) => String((error as { code?: string }).code ?? error),
        );
    // The webhook commit, in review-id order: waits for the first review.
    const webhook = session('webhook', (trx) => storeDeliveries(trx, db, deliveries));
    await waitFor(() => blocked(pids.webhook), 10_000);
    // The poll, its page newest first: the second review before the first.
    const poll = session('poll', (trx) =>
      upsertReviews(
        trx,
        db,
        [...reviews].reverse().map((r) => toReviewRow(r, new Date())),
        'feed',
      ),
    );
    await waitFor(() => blocked(pids.poll), 10_000);
    // The webhook commit takes the first review and goes on to the second; then the second is let go.
    await holdsFirst.query('commit');
    await holdsSecond.query('commit');

    expect(await Promise.all([webhook, poll])).toEqual(['committed', 'committed']);
  });
});
