import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import type { ReviewRow } from '../../src/mirror/reviewRow.js';
import { copyNewReviews } from '../../src/mirror/reviewsSql.js';
import { dropSchema, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';

const row = (id: string): ReviewRow => ({
  id,
  review_number: 'R-0A1B2C3D',
  created_at: '2026-11-01T10:00:00.000Z',
  rating: 4,
  comment: 'fine',
  is_verified: true,
  reviewer_name: 'Zoë',
  reviewer_email: null,
  professional_id: null,
  professional_name: null,
  observed_at: new Date('2026-11-01T10:00:05.000Z'),
});

/**
 * The database bound (DB_STATEMENT_TIMEOUT_SECONDS plus pg's read-timeout margin) holds for a
 * COPY as for any query: once pg gives up on a COPY, its connection is discarded, so the
 * transaction's ROLLBACK fails at once instead of waiting on the same frozen connection.
 */
describe('copyNewReviews on a connection that freezes', () => {
  const schema = uniqueSchema('copyfreeze');
  let proxy: TcpProxy;
  let db: Db;
  beforeAll(async () => {
    proxy = await startTcpProxy();
    db = await openDb({
      url: proxy.url(new URL(POSTGRES_URL).pathname.slice(1)),
      schema,
      poolMax: 2,
      dataDir: undefined,
      statementTimeoutMs: 1_000,
    });
    await migrate(db);
  });
  afterAll(async () => {
    proxy?.heal();
    await db?.close();
    await proxy?.close();
    await dropSchema(schema, POSTGRES_URL);
  });

  it('fails the transaction within one database bound, not two', async () => {
    let copyFailedAt = 0;
    let copyError: unknown;
    async function* pages() {
      // The COPY is under way (sent, not yet answered) when the network freezes.
      proxy.freeze();
      yield [row('6a6a6a6a-0000-4000-8000-000000000001')];
    }
    const failure = await db.knex
      .transaction(async (trx) => {
        try {
          return await copyNewReviews(trx, db, pages());
        } catch (error) {
          copyFailedAt = Date.now();
          copyError = error;
          throw error;
        }
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    const rollbackMs = Date.now() - copyFailedAt;

    expect(String(copyError)).toMatch(/Query read timeout/);
    // The transaction fails, with the COPY's error or its ROLLBACK's on the discarded connection.
    expect(failure).toBeInstanceOf(Error);
    // A ROLLBACK queued behind the COPY on the frozen connection waits for knex's own 5 s bound
    // on it (and the connection, kept, for pg's next read timeout of 11 s): a discarded one fails
    // at once.
    expect(rollbackMs).toBeLessThan(2_500);
  }, 60_000);
});
