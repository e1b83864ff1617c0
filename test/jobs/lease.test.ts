import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import { JobLease, LeaseLostError } from '../../src/jobs/lease.js';
import { acquireLease, holdsLease, readLeases, releaseLease, renewLease } from '../../src/jobs/leaseSql.js';
import { runJob } from '../../src/jobs/runner.js';
import { formatStatus, readStatus } from '../../src/status/report.js';
import { dropSchema, freshDb, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { startTcpProxy } from '../helpers/tcpProxy.js';
import { waitFor } from '../helpers/wait.js';

/** Ends `job`'s current lease at once, as if its holder had died a lease period ago. */
async function expire(db: Db, job: string): Promise<void> {
  await db
    .knex(db.table('job_leases'))
    .where({ job })
    .update({ expires_at: db.knex.raw("now() - interval '1 second'") });
}

describe('job leases', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb();
  });
  afterAll(async () => db?.close());

  it('grant a job to one holder at a time, with a token that grows at every grant', async () => {
    const a = await acquireLease(db.knex, db, 'j1', 'replica-a', 30);
    expect(a).toBe('1');
    expect(await acquireLease(db.knex, db, 'j1', 'replica-b', 30)).toBeUndefined();
    // The holder itself cannot take it twice either: one run per job, whoever asks.
    expect(await acquireLease(db.knex, db, 'j1', 'replica-a', 30)).toBeUndefined();
    expect(await acquireLease(db.knex, db, 'other-job', 'replica-b', 30)).toBe('1');
    await releaseLease(db.knex, db, 'j1', a!);
    const b = await acquireLease(db.knex, db, 'j1', 'replica-b', 30);
    expect(b).toBe('2');
    const leases = await readLeases(db.knex, db);
    expect(leases.find((l) => l.job === 'j1')).toMatchObject({ holder: 'replica-b', token: '2', held: true });
  });

  it('let a lease that ran out be taken over, after which the old token neither renews nor passes the fence', async () => {
    const a = await acquireLease(db.knex, db, 'j2', 'replica-a', 30);
    // Ran out but nobody took it: its writes are still safe (a takeover waits for them), but it is
    // not revived: the run stopped when it could not renew in time.
    await expire(db, 'j2');
    expect(await holdsLease(db.knex, db, 'j2', a!)).toBe(true);
    expect(await renewLease(db.knex, db, 'j2', a!, 30)).toBe(false);
    const b = await acquireLease(db.knex, db, 'j2', 'replica-b', 30);
    expect(b).toBe('2');
    expect(await holdsLease(db.knex, db, 'j2', a!)).toBe(false);
    expect(await renewLease(db.knex, db, 'j2', a!, 30)).toBe(false);
    // A late release of the old holder frees nothing.
    await releaseLease(db.knex, db, 'j2', a!);
    expect((await readLeases(db.knex, db)).find((l) => l.job === 'j2')).toMatchObject({
      token: '2',
      held: true,
    });
  });

  it('never revive a lease its holder released while a renewal was in flight', async () => {
    const a = await acquireLease(db.knex, db, 'j6', 'replica-a', 30);
    await releaseLease(db.knex, db, 'j6', a!);
    // The renewal asked before the release lands after it.
    expect(await renewLease(db.knex, db, 'j6', a!, 30)).toBe(false);
    expect((await readLeases(db.knex, db)).find((l) => l.job === 'j6')).toMatchObject({ held: false });
    expect(await acquireLease(db.knex, db, 'j6', 'replica-b', 30)).toBe('2');
  });

  it('make a takeover wait for a write of the old holder in flight, and then fence the old holder off', async () => {
    if (db.backend !== 'postgres') return; // one connection: nothing runs concurrently on it
    const a = await acquireLease(db.knex, db, 'j3', 'replica-a', 30);
    await expire(db, 'j3');
    const order: string[] = [];
    let takeover: Promise<string | undefined> | undefined;
    await db.knex.transaction(async (trx) => {
      expect(await holdsLease(trx, db, 'j3', a!)).toBe(true);
      takeover = acquireLease(db.knex, db, 'j3', 'replica-b', 30).then((t) => {
        order.push('takeover');
        return t;
      });
      await sleep(300);
      order.push('old holder commits');
    });
    expect(await takeover).toBe('2');
    expect(order).toEqual(['old holder commits', 'takeover']);
    expect(await holdsLease(db.knex, db, 'j3', a!)).toBe(false);
  });

  it('renew a held lease while its run lasts, and abort the run when another replica takes it over', async () => {
    const lease = await JobLease.tryAcquire(db, 'j4', { holder: 'replica-a', seconds: 3 }, quietLog);
    expect(lease).toBeDefined();
    const before = (await readLeases(db.knex, db)).find((l) => l.job === 'j4')!;
    await sleep(1_500); // past the first renewal (every second)
    const after = (await readLeases(db.knex, db)).find((l) => l.job === 'j4')!;
    expect(after.expiresAt.getTime()).toBeGreaterThan(before.expiresAt.getTime());
    expect(lease!.signal.aborted).toBe(false);

    await expire(db, 'j4');
    expect(await acquireLease(db.knex, db, 'j4', 'replica-b', 30)).toBe('2');
    await waitFor(async () => lease!.signal.aborted, 5_000);
    expect(lease!.signal.reason).toBeInstanceOf(LeaseLostError);
    await expect(db.knex.transaction((trx) => lease!.fence(trx))).rejects.toBeInstanceOf(LeaseLostError);
    await lease!.release();
    expect((await readLeases(db.knex, db)).find((l) => l.job === 'j4')).toMatchObject({
      holder: 'replica-b',
      held: true,
    });
  });

  it('record which replica ran a job, and fail a run whose lease was taken over at its next fenced write', async () => {
    const deps = { db, log: quietLog, lease: { holder: 'replica-a', seconds: 30 } };
    let checkpoints = 0;
    const run = runJob(
      deps,
      {
        name: 'reviews',
        run: async (_counts, _signal, info) => {
          await db.knex.transaction((trx) => info!.fence(trx));
          checkpoints++;
          // Meanwhile the lease runs out and another replica takes the job over.
          await expire(db, 'reviews');
          await acquireLease(db.knex, db, 'reviews', 'replica-b', 30);
          await db.knex.transaction((trx) => info!.fence(trx));
          checkpoints++;
        },
      },
      { wait: false },
    );
    await expect(run).rejects.toBeInstanceOf(LeaseLostError);
    expect(checkpoints).toBe(1);
    const [row] = await db.knex(db.table('sync_runs')).where({ job: 'reviews' });
    expect(row).toMatchObject({ replica: 'replica-a', outcome: 'failed', error_kind: 'retryable' });
    // The new holder's lease is left alone by the old holder's release.
    expect((await readLeases(db.knex, db)).find((l) => l.job === 'reviews')).toMatchObject({
      holder: 'replica-b',
      held: true,
    });
  });

  it('make the CLI queue behind a run of another replica, and give up after its bound naming the holder', async () => {
    const other = await JobLease.tryAcquire(db, 'j5', { holder: 'daemon-x', seconds: 30 }, quietLog);
    const settings = { holder: 'cli', seconds: 30 };
    await expect(
      JobLease.acquire(db, 'j5', settings, quietLog, { maxWaitMs: 300, pollMs: 100 }),
    ).rejects.toThrow(/job j5 is still held by daemon-x/);
    const queued = JobLease.acquire(db, 'j5', settings, quietLog, { maxWaitMs: 10_000, pollMs: 100 });
    await sleep(300);
    await other!.release();
    const mine = await queued;
    expect(mine.token).toBe('2');
    await mine.release();
  });

  it('make the CLI stop queueing with the reason it was told to stop for', async () => {
    const other = await JobLease.tryAcquire(db, 'j-stopped', { holder: 'daemon-y', seconds: 30 }, quietLog);
    const stop = new AbortController();
    const reason = new Error('interrupted by SIGTERM');
    const queued = JobLease.acquire(db, 'j-stopped', { holder: 'cli', seconds: 30 }, quietLog, {
      maxWaitMs: 10_000,
      pollMs: 5_000,
      signal: stop.signal,
    }).catch((e: unknown) => e);
    await sleep(300);
    stop.abort(reason);
    expect(await queued).toBe(reason);
    await other!.release();
  });

  it('show in status which replica runs which job, and until when its lease lasts', async () => {
    let during = '';
    let duringJson: unknown;
    await runJob(
      { db, log: quietLog, lease: { holder: 'host-7:4242:beef01', seconds: 30 } },
      {
        name: 'locations',
        run: async () => {
          const report = await readStatus(db);
          duringJson = report.jobs.find((j) => j.job === 'locations');
          during = formatStatus(report);
        },
      },
      { wait: false },
    );
    expect(duringJson).toMatchObject({ held_by: 'host-7:4242:beef01', held_until: expect.any(String) });
    expect(during).toMatch(
      /running now \(job leases\):\n\s+job\s+replica\s+lease\n\s+locations\s+host-7:4242:beef01\s+until 20\d\d-/,
    );
    const after = await readStatus(db);
    expect(after.jobs.find((j) => j.job === 'locations')).toMatchObject({ held_by: null, held_until: null });
    expect(formatStatus(after)).not.toContain('host-7:4242:beef01');
  });
});

/**
 * A replica whose connection to the database freezes (a partition, a hung pooler) waits on its
 * renewal for as long as the query timeout allows, minutes. Its lease runs out meanwhile, and
 * another replica takes the job: the run must have been stopped by then, since what it sends to
 * the platform passes no fence.
 */
describe('a lease whose renewal hangs', () => {
  const schema = uniqueSchema();
  afterAll(() => dropSchema(schema, POSTGRES_URL));

  it('stops the run once the lease may have run out, before another replica can take the job', async () => {
    const proxy = await startTcpProxy();
    const other = await openDb({ url: POSTGRES_URL, schema, poolMax: 2, dataDir: undefined });
    const frozen = await openDb({
      url: proxy.url(new URL(POSTGRES_URL).pathname.slice(1)),
      schema,
      poolMax: 2,
      dataDir: undefined,
      statementTimeoutMs: 30_000,
    });
    try {
      await migrate(other);
      const lease = await JobLease.tryAcquire(
        frozen,
        'contacts:inbox',
        { holder: 'replica-a', seconds: 2 },
        quietLog,
      );
      expect(lease).toBeDefined();
      proxy.freeze();
      // Whenever the other replica gets the job, the frozen one's run has stopped already.
      const token = await waitFor(async () => {
        const taken = await acquireLease(other.knex, other, 'contacts:inbox', 'replica-b', 30);
        return taken === undefined ? undefined : { taken, stopped: lease!.signal.aborted };
      }, 10_000);
      expect(token).toEqual({ taken: '2', stopped: true });
      expect(lease!.signal.reason).toBeInstanceOf(LeaseLostError);
      proxy.heal();
      await lease!.release();
    } finally {
      proxy.heal();
      await frozen.close().catch(() => {});
      await other.close();
      await proxy.close();
    }
  }, 40_000);
});
