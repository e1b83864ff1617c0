import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import { toReviewRow } from '../../src/mirror/reviewRow.js';
import { copyNewReviews } from '../../src/mirror/reviewsSql.js';
import { parseEvent } from '../../src/webhooks/event.js';
import { type Delivery, storeDeliveries } from '../../src/webhooks/inboxSql.js';
import { dropSchema, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { type RunningPgBouncer, startPgBouncer } from '../helpers/pgbouncer.js';
import { makeReview } from '../webhooks/helpers.js';

/** `count` deliveries of new reviews, as the receiver hands them to the inbox. */
const deliveries = (count: number): Delivery[] =>
  Array.from({ length: count }, () => {
    const review = makeReview();
    const body = JSON.stringify({ event: 'review.created', timestamp: '1', data: review });
    const parsed = parseEvent(Buffer.from(body));
    if (!parsed.ok) throw new Error(parsed.detail);
    return { event: parsed.event, body, observedAt: new Date() };
  });

const countReviews = async (db: Db) =>
  Number((await db.knex(db.table('reviews')).count({ n: '*' }).first())?.n);

/**
 * The inbox's statement runs for every few webhook deliveries, so on a server reached directly it
 * is prepared once per connection (docs/benchmarks.md: most of PostgreSQL's CPU per delivery);
 * behind a transaction pooler it must not be, since the next transaction runs on another server
 * connection.
 */
describe('prepared statements', () => {
  const schema = uniqueSchema('prep');

  beforeAll(async () => {
    const db = await openDb({ url: POSTGRES_URL, schema, poolMax: 1, dataDir: undefined });
    await migrate(db);
    await db.close();
  });
  afterAll(() => dropSchema(schema, POSTGRES_URL));

  it('on PostgreSQL itself: the inbox statement is parsed once per connection and then only executed', async () => {
    const db = await openDb({ url: POSTGRES_URL, schema, poolMax: 1, dataDir: undefined });
    try {
      expect(db.namedStatements).toBe(true);
      for (const size of [1, 3, 8]) await storeDeliveries(db.knex, db, deliveries(size));
      // The pool's one connection: the session that prepared it.
      const { rows } = await db.knex.raw(
        'select name, generic_plans + custom_plans as runs from pg_prepared_statements',
      );
      expect(rows).toEqual([{ name: expect.stringMatching(/^review_mirror_[0-9a-f]{24}$/), runs: '3' }]);
      expect(await countReviews(db)).toBe(12);
    } finally {
      await db.close();
    }
  });

  describe('behind PgBouncer in transaction mode', () => {
    let bouncer: RunningPgBouncer;
    // Few server connections for many client ones: consecutive transactions of one client
    // connection land on different server connections.
    beforeAll(async () => {
      bouncer = await startPgBouncer(POSTGRES_URL, { poolSize: 2 });
    });
    afterAll(() => bouncer?.close());

    const throughBouncer = () =>
      openDb({ url: bouncer.url, schema, poolMax: 8, dataDir: undefined, pooler: 'transaction' });
    const storeConcurrently = (db: Db, rounds: number) =>
      Promise.all(Array.from({ length: rounds }, () => storeDeliveries(db.knex, db, deliveries(2))));

    it('with DB_POOLER=transaction no statement is named, and every store succeeds', async () => {
      const db = await throughBouncer();
      try {
        expect(db.namedStatements).toBe(false);
        const before = await countReviews(db);
        await storeConcurrently(db, 100);
        expect((await countReviews(db)) - before).toBe(200);
      } finally {
        await db.close();
      }
    });

    it("a backfill's groups of new reviews go through it by COPY, each in its transaction", async () => {
      const db = await throughBouncer();
      try {
        const before = await countReviews(db);
        const copied = await Promise.all(
          Array.from({ length: 40 }, () =>
            db.knex.transaction((trx) =>
              copyNewReviews(trx, db, [
                Array.from({ length: 25 }, () => toReviewRow(makeReview(), new Date())),
              ]),
            ),
          ),
        );
        expect(copied).toEqual(Array(40).fill(25));
        expect((await countReviews(db)) - before).toBe(1_000);
      } finally {
        await db.close();
      }
    });

    it('a named statement there fails (why the setting matters), and the error names the setting', async () => {
      const db = await throughBouncer();
      try {
        await expect(storeConcurrently({ ...db, namedStatements: true }, 100)).rejects.toThrow(
          /prepared statement .*: DATABASE_URL looks like a transaction pooler; set DB_POOLER=transaction/,
        );
      } finally {
        await db.close();
      }
    });
  });
});
