import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MirrorGauges } from '../../src/admin/mirrorGauges.js';
import { type Db, openDb } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import type { RunCounts } from '../../src/jobs/runCounts.js';
import { runJob } from '../../src/jobs/runner.js';
import { makeMetrics } from '../../src/metrics.js';
import { syncProfessionals } from '../../src/pull/syncDirectory.js';
import { runCli } from '../helpers/cli.js';
import { dropSchema, freshDb, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import type { FakeAnswer } from '../helpers/fakePlatform.js';
import { quietLog } from '../helpers/log.js';
import type { TestSandbox } from '../helpers/sandbox.js';
import { fakePlatformFixture, pullContext } from '../pull/helpers.js';
import { pushCliSetup } from '../push/helpers.js';

type Metrics = ReturnType<typeof makeMetrics>;

/** A replica's gauges read from `db` once, as at its start-up: its own registry, nothing run. */
async function replicaReading(db: Db): Promise<Metrics> {
  const metrics = makeMetrics();
  expect(await new MirrorGauges({ db, log: quietLog, metrics }).refresh()).toBe(true);
  return metrics;
}

/** The samples of a gauge: one value for an unlabelled gauge, none when it is absent. */
const samplesOf = async (gauge: Metrics[keyof Metrics] & { get(): Promise<{ values: unknown[] }> }) =>
  (await gauge.get()).values as Array<{ value: number; labels: Record<string, string | number> }>;

const recordRun = (db: Db, job: string, finishedAt: Date, counts: RunCounts, outcome = 'success') =>
  db.knex(db.table('sync_runs')).insert({
    job,
    started_at: new Date(finishedAt.getTime() - 1_000),
    finished_at: finishedAt,
    outcome,
    counts: JSON.stringify(counts),
  });

/**
 * The last successful contacts push is recorded in the database (the run of `contacts push` or of
 * the inbox, in `sync_runs`, with its counts): every replica exports it from there, also one that
 * has just restarted or never ran the inbox, as the job gauges are.
 */
describe('the contacts last-success gauge', () => {
  let sandbox: TestSandbox;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const schema = uniqueSchema('gauges');
  beforeAll(async () => {
    ({ sandbox, dir, env } = await pushCliSetup({ seed: 11, schema }));
  });
  afterAll(async () => {
    await sandbox?.close();
    await dropSchema(schema);
  });

  it('is absent, not 0, while no export was ever pushed', async () => {
    const db = await freshDb();
    try {
      expect(await samplesOf((await replicaReading(db)).contactsLastSuccess)).toEqual([]);
    } finally {
      await db.close();
    }
  });

  it('is the end of the last push with every contact on the platform, on every replica', async () => {
    const file = join(dir, 'crm.csv');
    await writeFile(
      file,
      'external_id,email,name\r\ncrm-1,one@example.com,One\r\ncrm-2,two@example.com,Two\r\n',
    );
    const pushed = await runCli(['contacts', 'push', file], env);
    expect(pushed.code, pushed.stderr).toBe(0);

    // The command has exited: its process, the only one that pushed, is gone.
    const db = await openDb({
      url: TEST_DATABASE_URL,
      schema,
      poolMax: 2,
      dataDir: TEST_DATABASE_URL === undefined ? join(dir, 'data') : undefined,
    });
    try {
      const run = await db.knex(db.table('sync_runs')).where({ job: JOB.contactsPush }).first();
      expect(run).toMatchObject({
        outcome: 'success',
        counts: expect.objectContaining({ read: 2, failed: 0 }),
      });
      const pushedAt = new Date(run.finished_at).getTime() / 1000;
      for (const replica of [await replicaReading(db), await replicaReading(db)]) {
        expect(await samplesOf(replica.contactsLastSuccess)).toEqual([
          expect.objectContaining({ value: pushedAt }),
        ]);
      }

      // Later runs that pushed no export with every contact on the platform count for nothing.
      const later = (minutes: number) => new Date(run.finished_at.getTime() + minutes * 60_000);
      await recordRun(db, JOB.contactsInbox, later(1), {}); // an inbox poll that found nothing
      await recordRun(db, JOB.contactsInbox, later(2), { events_enqueued: 3, files_processed: 1 });
      await recordRun(db, JOB.contactsInbox, later(3), { read: 10, failed: 2, files_failed: 1 });
      await recordRun(db, JOB.contactsInbox, later(4), { read: 5, failed: 0 }, 'failed');
      const unmoved = await replicaReading(db);
      expect(await samplesOf(unmoved.contactsLastSuccess)).toEqual([
        expect.objectContaining({ value: pushedAt }),
      ]);

      // The inbox of some replica pushes an export whole: every replica follows.
      await recordRun(db, JOB.contactsInbox, later(5), { read: 4, failed: 0, files_processed: 1 });
      const followed = await replicaReading(db);
      expect(await samplesOf(followed.contactsLastSuccess)).toEqual([
        expect.objectContaining({ value: later(5).getTime() / 1000 }),
      ]);
    } finally {
      await db.close();
    }
  });
});

/**
 * `review_mirror_webhook_miss_ratio` is unlabelled: prom-client exports such a gauge at 0 from its
 * creation and after `reset()`, which reads as "no review missed its webhook" where nothing was
 * measured. Until a health check is read, it is absent.
 */
describe('the webhook miss ratio before anything was measured', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb();
  });
  afterAll(async () => {
    await db?.close();
  });
  const ratio = async (metrics: Metrics) => (await samplesOf(metrics.webhookMissRatio)).map((s) => s.value);
  const checked = (feed: number, webhook: number): RunCounts => ({
    listed: 1,
    active: 1,
    inactive: 0,
    failing: 0,
    first_seen_by_feed: feed,
    first_seen_by_webhook: webhook,
  });

  it('is absent at start-up, and while no health check succeeded', async () => {
    expect(await ratio(makeMetrics())).toEqual([]);
    expect(await ratio(await replicaReading(db))).toEqual([]);
  });

  it('is absent, not 0, while the newest check was recorded by an older version', async () => {
    const metrics = makeMetrics();
    const gauges = new MirrorGauges({ db, log: quietLog, metrics });
    await recordRun(db, JOB.webhookHealth, new Date('2030-01-01T10:00:00Z'), checked(3, 1));
    expect(await gauges.refresh()).toBe(true);
    expect(await ratio(metrics)).toEqual([0.75]);
    // A rolling upgrade: an older replica checked last, and exports what it saw itself.
    await recordRun(db, JOB.webhookHealth, new Date('2030-01-01T10:05:00Z'), { listed: 1 });
    expect(await gauges.refresh()).toBe(true);
    expect(await ratio(metrics)).toEqual([]);
    expect(await ratio(await replicaReading(db))).toEqual([]);
  });
});

/**
 * A professional whose single read fails for it alone is kept and read again next run, and the
 * run succeeds: its count in the run (`details_failed`) is what the unread-records gauge exports,
 * on every replica, over real HTTP from a platform answering those reads with 400.
 */
describe('the directory records unread', () => {
  const pros = Array.from({ length: 5 }, (_, i) => ({
    id: randomUUID(),
    slug: `pro-${i + 1}`,
    first_name: `First ${i + 1}`,
    last_name: `Last ${i + 1}`,
    active: true,
    profile_url: `https://example.test/p/${i + 1}`,
    default_survey_url: null,
    created_at: '2026-01-01T10:00:00Z',
  }));
  const failing = new Set(['pro-1', 'pro-3', 'pro-5']);
  // Every single read answering an error: the read is down, and the run fails.
  let down = false;
  const fx = fakePlatformFixture(({ path, query }): FakeAnswer => {
    if (path === '/professionals') {
      const listed = query.get('active') === 'true' ? pros : [];
      return {
        status: 200,
        body: {
          professionals: listed,
          pagination: { count: listed.length, has_more: false, next_cursor: null },
        },
      };
    }
    const slug = /^\/professionals\/(.+)$/.exec(path)?.[1] ?? '';
    const found = pros.find((p) => p.slug === slug);
    if (down || failing.has(slug))
      return { status: 400, body: { error: 'this professional cannot be read' } };
    return found === undefined
      ? { status: 404, body: { error: 'not found' } }
      : { status: 200, body: { ...found, location_id: 7 } };
  });
  /** One run, reading one record at a time (in listing order: a failing read between two read). */
  const sync = (options: { full: boolean }) =>
    runJob(
      { db: fx.db, log: quietLog },
      {
        name: JOB.professionals,
        run: (c, s) => syncProfessionals(pullContext(fx.db, fx.api, { detailConcurrency: 1 }), c, options, s),
      },
      { wait: true },
    );
  const unread = async () =>
    Object.fromEntries(
      (await samplesOf((await replicaReading(fx.db)).directoryRecordsUnread)).map((s) => [
        `${s.labels.resource}/${s.labels.read}`,
        s.value,
      ]),
    );

  it('exports nothing before a directory job succeeded', async () => {
    expect(await unread()).toEqual({});
  });

  it('exports the records the last successful run could not read, until a run reads them', async () => {
    expect(await sync({ full: false })).toMatchObject({ outcome: 'success', counts: { details_failed: 3 } });
    expect(await unread()).toEqual({ 'professionals/detail': 3, 'professionals/confirm': 0 });
    // A run on which every read fails (the record read before, tried, too) is taken for down and
    // fails. The gauge keeps what the last successful run counted.
    down = true;
    await expect(sync({ full: false })).rejects.toThrow(/failed for 3 records in a row/);
    expect(await unread()).toEqual({ 'professionals/detail': 3, 'professionals/confirm': 0 });
    down = false;
    // The next run reads only those three, which fail in a row, and a record read before, which
    // answers: their own failures, and the run succeeds.
    expect(await sync({ full: false })).toMatchObject({ outcome: 'success', counts: { details_failed: 3 } });
    expect(await unread()).toEqual({ 'professionals/detail': 3, 'professionals/confirm': 0 });
    expect(await sync({ full: true })).toMatchObject({ outcome: 'success', counts: { details_failed: 3 } });
    expect(await unread()).toEqual({ 'professionals/detail': 3, 'professionals/confirm': 0 });
    failing.clear();
    const healed = await sync({ full: false });
    expect(healed.outcome).toBe('success');
    expect(healed.counts.details_failed).toBeUndefined();
    expect(await unread()).toEqual({ 'professionals/detail': 0, 'professionals/confirm': 0 });
  });
});
