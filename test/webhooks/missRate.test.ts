import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { toReviewRow } from '../../src/mirror/reviewRow.js';
import { upsertReviews } from '../../src/mirror/reviewsSql.js';
import { readWebhookMissRate } from '../../src/webhooks/webhooksSql.js';
import { freshDb } from '../helpers/db.js';
import { makeReview } from './helpers.js';

describe('readWebhookMissRate', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb();
  });
  afterAll(async () => db?.close());

  const store = (createdAt: string, source: 'feed' | 'webhook') =>
    upsertReviews(db.knex, db, [toReviewRow(makeReview({ created_at: createdAt }), new Date())], source);

  it('has no ratio before any webhook exists, and never counts reviews older than the first registration', async () => {
    await store('2026-01-01T00:00:00.000Z', 'feed'); // a backfill: no webhook could have delivered it
    expect(await readWebhookMissRate(db.knex, db)).toEqual({ feed: 0, webhook: 0, ratio: null });

    await db.knex(db.table('webhooks')).insert({
      id: 'wh_1',
      url: 'https://mirror.example.com/webhooks/review-created',
      registered_at: new Date('2026-06-01T00:00:00.000Z'),
      deleted_at: new Date('2026-07-01T00:00:00.000Z'),
    });
    await store('2026-06-02T00:00:00.000Z', 'webhook');
    await store('2026-06-03T00:00:00.000Z', 'webhook');
    await store('2026-06-04T00:00:00.000Z', 'feed'); // dropped delivery, filled in by the poll
    expect(await readWebhookMissRate(db.knex, db)).toEqual({ feed: 1, webhook: 2, ratio: 1 / 3 });
  });
});
