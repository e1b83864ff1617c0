import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import { type Fence, LeaseLostError } from '../../src/jobs/lease.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { readCheckpoint } from '../../src/pull/syncStateSql.js';
import { freshDb } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { pullContext, testApi } from './helpers.js';

describe('groups of pages written at once', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 5_000, seed: 29 });
    db = await freshDb();
    api = testApi(sandbox);
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  it('never commits a checkpoint past a group whose write failed, even one written beside it', async () => {
    // Only the first group's transaction is refused; the groups after it are written while it
    // fails, and must roll back with it rather than checkpoint past its rows.
    let calls = 0;
    const failFirst: Fence = async () => {
      if (calls++ === 0) throw new LeaseLostError('refused for the test');
    };
    await expect(syncReviews(pullContext(db, api), {}, undefined, failFirst)).rejects.toThrow(LeaseLostError);
    // On a server the group beside it was written too; the embedded database writes one at a time.
    expect(calls).toBe(db.backend === 'postgres' ? 2 : 1);
    const state = await readCheckpoint(db.knex, db, JOB.reviews);
    expect(state.cursor).toBeNull();
    expect(state.watermark).toBeNull();
    const count = async () => Number((await db.knex(db.table('reviews')).count({ n: '*' }))[0]?.n);
    expect(await count()).toBe(0);

    // The next run starts the walk again from the newest review and completes it.
    await syncReviews(pullContext(db, api), {});
    expect(await count()).toBe(5_000);
  });
});
