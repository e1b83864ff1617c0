import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { parseEvent } from '../../src/webhooks/event.js';
import { storeDeliveries } from '../../src/webhooks/inboxSql.js';
import { CLI, cliEnv, freePort, runCli } from '../helpers/cli.js';
import { dropSchema, TEST_DATABASE_URL, uniqueSchema } from '../helpers/db.js';
import { seededDataDir } from '../helpers/embeddedTemplate.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { makeReview } from '../webhooks/helpers.js';

const day = (d: string) => `2026-10-${d}T12:00:00.000Z`;

/**
 * The operator's tools of the built CLI: a date-range backfill that leaves the watermark alone,
 * the job state as JSON that round-trips, and replay of the stored webhook inbox.
 */
describe('operator tools', () => {
  let sandbox: TestSandbox;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  const schema = uniqueSchema('ops');

  beforeAll(async () => {
    sandbox = await testSandbox();
    dataDir = await mkdtemp(join(tmpdir(), 'rm-ops-'));
    if (!TEST_DATABASE_URL) await seededDataDir(dataDir);
    env = cliEnv({
      DATABASE_URL: TEST_DATABASE_URL,
      DATA_DIR: dataDir,
      DB_SCHEMA: schema,
      REVIEWS_API_URL: sandbox.url,
      REVIEWS_API_KEY: sandbox.apiKey,
    });
    // One review a day from October 1st to 20th.
    await sandbox.control.submitReviews(
      sandbox.companyId,
      Array.from({ length: 20 }, (_, i) => ({
        comment: `day ${i + 1}`,
        created_at: day(String(i + 1).padStart(2, '0')),
      })),
    );
  });
  afterAll(async () => {
    await sandbox?.close();
    await dropSchema(schema);
    await rm(dataDir, { recursive: true, force: true });
  });

  /** The mirror, opened only while `fn` runs (the embedded database is one process's at a time). */
  async function withMirror<T>(fn: (db: Db) => Promise<T>): Promise<T> {
    const db = await openDb({ url: TEST_DATABASE_URL, schema, poolMax: 1, dataDir });
    try {
      return await fn(db);
    } finally {
      await db.close();
    }
  }
  const comments = (db: Db) => db.knex(db.table('reviews')).orderBy('created_at').pluck('comment');
  const cli = (args: string[], input?: string) => {
    const r = spawnSync(process.execPath, [CLI, ...args], { env, input, encoding: 'utf8' });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };

  it('backfills a date range without moving the watermark or the checkpoint, writing nothing outside it', async () => {
    expect((await runCli(['sync', 'reviews'], env)).code).toBe(0);
    const stateBefore = await withMirror(async (db) => {
      // An incident lost days 5 to 9, and day 15.
      await db
        .knex(db.table('reviews'))
        .whereIn('comment', ['day 5', 'day 6', 'day 7', 'day 8', 'day 9', 'day 15'])
        .del();
      return db.knex(db.table('sync_state')).where({ job: 'reviews' }).first();
    });
    expect(stateBefore.watermark).not.toBeNull();

    const backfill = await runCli(
      ['sync', 'reviews', '--since', '2026-10-04T23:00:00Z', '--until', '2026-10-10T00:00:00Z'],
      env,
    );
    expect(backfill.stderr).toBe('');
    expect(backfill.code).toBe(0);
    // Days 5 to 20 read; days 10 (at noon) to 20 are after --until; the five lost days are back.
    expect(backfill.stdout).toMatch(/^reviews:backfill: success /);
    expect(backfill.stdout).toContain(' fetched=16 ');
    expect(backfill.stdout).toContain('after_until=11 ');
    expect(backfill.stdout).toContain(' inserted=5 updated=0');
    await withMirror(async (db) => {
      const all = await comments(db);
      expect(all).toEqual(expect.arrayContaining(['day 5', 'day 6', 'day 7', 'day 8', 'day 9']));
      expect(all).not.toContain('day 15'); // after --until: read past, not written
      expect(all).toHaveLength(19);
      expect(await db.knex(db.table('sync_state')).where({ job: 'reviews' }).first()).toEqual(stateBefore);
      expect(await db.knex(db.table('sync_state')).where({ job: 'reviews:backfill' })).toEqual([]);
      const run = await db.knex(db.table('sync_runs')).where({ job: 'reviews:backfill' }).first();
      expect(run).toMatchObject({ outcome: 'success' });
    });
  });

  it.each([
    [
      ['sync', 'locations', '--since', '2026-10-01'],
      'sync: --since and --until apply to `sync reviews` only',
    ],
    [
      ['sync', 'reviews', '--full', '--since', '2026-10-01'],
      'sync: --full reads the whole feed: it takes no --since or --until',
    ],
    [
      ['sync', 'reviews', '--since', '2026-10-05', '--until', '2026-10-01'],
      'sync: --until must be later than --since',
    ],
  ])('refuses %o in one line', async (args, message) => {
    const result = await runCli(args, env);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`review-mirror: ${message}\n`);
  });

  it.each(['2026-10-01T10:00', '2026-02-30', '2026-04-31T12:00:00Z'])(
    'refuses the time %s (no zone, or a date that does not exist), naming the option',
    async (time) => {
      const result = await runCli(['sync', 'reviews', '--since', time], env);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain(`option '--since <time>' argument '${time}' is invalid`);
      expect(result.stderr).toContain('must be an ISO 8601 time with its zone, on a date that exists');
    },
  );

  it('prints the job state as JSON that `state set` takes back unchanged, from a file or stdin', async () => {
    const got = cli(['state', 'get', '--job', 'reviews']);
    expect(got.code).toBe(0);
    const state = JSON.parse(got.stdout);
    expect(state).toEqual({
      job: 'reviews',
      watermark: expect.stringMatching(/^2026-10-20T/),
      cursor: null,
      walk_since: null,
      walk_newest: null,
      walk_started_at: null,
    });
    const file = join(dataDir, 'state.json');
    await writeFile(file, got.stdout);
    const set = cli(['state', 'set', '--job', 'reviews', file]);
    expect(set.stderr).toBe('');
    expect(set.code).toBe(0);
    expect(cli(['state', 'get', '--job', 'reviews']).stdout).toBe(got.stdout);

    // Moved deliberately, through stdin: the next incremental run re-reads from there.
    const moved = cli(
      ['state', 'set', '--job', 'reviews'],
      JSON.stringify({ watermark: '2026-10-12T00:00:00Z' }),
    );
    expect(moved.code).toBe(0);
    expect(moved.stdout).toContain('"watermark": "2026-10-12T00:00:00.000Z"');
    expect(moved.stdout).toContain(`was: ${got.stdout.trim()}`);
    const sync = await runCli(['sync', 'reviews'], env);
    expect(sync.stdout).toMatch(/^reviews: success .*fetched=9 /m); // day 12 - overlap, through day 20
    await withMirror(async (db) => expect(await comments(db)).toContain('day 15'));
  });

  it.each([
    [
      '{"watermark": "yesterday"}',
      "the state's watermark must be an ISO 8601 time with its zone on a date that exists (2026-11-01T00:00:00Z), or null",
    ],
    [
      '{"watermark": "2026-02-30T00:00:00Z"}',
      "the state's watermark must be an ISO 8601 time with its zone on a date that exists (2026-11-01T00:00:00Z), or null",
    ],
    ['{"watermark": null, "curser": "x"}', 'the state: unknown field curser'],
    ['{"job": "reviews:reconcile"}', 'the state is of job reviews:reconcile, not reviews'],
    ['{"cursor": 12}', "the state's cursor must be a string, or null"],
    ['not json', 'the state is not JSON (print one with `review-mirror state get --job JOB`)'],
  ])('refuses the state %s, saying why, and changes nothing', (input, message) => {
    const before = cli(['state', 'get', '--job', 'reviews']).stdout;
    const result = cli(['state', 'set', '--job', 'reviews'], input);
    expect(result.stderr).toBe(`review-mirror: ${message}\n`);
    expect(result.code).toBe(1);
    expect(cli(['state', 'get', '--job', 'reviews']).stdout).toBe(before);
  });

  it('resets a job state only when confirmed, and refuses an unknown job', async () => {
    const unconfirmed = await runCli(['state', 'reset', '--job', 'reviews:reconcile'], env);
    expect(unconfirmed.code).toBe(1);
    expect(unconfirmed.stderr).toBe(
      'review-mirror: state reset: stdin is not a terminal to confirm on; pass --yes to reset\n',
    );
    const unknown = await runCli(['state', 'get', '--job', 'locations'], env);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain('Allowed choices are reviews, reviews:reconcile');

    const reset = cli(['state', 'reset', '--job', 'reviews', '--yes']);
    expect(reset.code).toBe(0);
    expect(reset.stdout).toContain('state of reviews reset; its next run starts from the beginning');
    expect(JSON.parse(cli(['state', 'get', '--job', 'reviews']).stdout)).toMatchObject({ watermark: null });
    const sync = await runCli(['sync', 'reviews'], env);
    expect(sync.stdout).toMatch(/^reviews: success .*fetched=20 /m);
  });

  it('replays stored webhook deliveries through the same upsert: all, since a time, or one review', async () => {
    const early = makeReview({ comment: 'delivered early', created_at: day('21') });
    const late = makeReview({ comment: 'delivered late', created_at: day('22') });
    const at = (review: typeof early, observedAt: Date) => {
      const body = JSON.stringify({
        event: 'review.created',
        timestamp: String(Math.floor(observedAt.getTime() / 1000)),
        data: review,
      });
      const parsed = parseEvent(Buffer.from(body));
      if (!parsed.ok) throw new Error(parsed.detail);
      return { event: parsed.event, body, observedAt };
    };
    const since = await withMirror(async (db) => {
      await storeDeliveries(db.knex, db, [at(early, new Date(Date.now() - 60_000))]);
      await db
        .knex(db.table('webhook_inbox'))
        .update({ received_at: db.knex.raw("now() - interval '1 hour'") });
      await storeDeliveries(db.knex, db, [at(late, new Date())]);
      // A restore from an older backup: neither review is in the mirror any more.
      await db.knex(db.table('reviews')).whereIn('id', [early.id, late.id]).del();
      return new Date(Date.now() - 10 * 60_000).toISOString();
    });

    const recent = await runCli(['webhooks', 'replay', '--since', since], env);
    expect(recent.stderr).toBe('');
    expect(recent.stdout).toBe(
      'replayed 1 stored deliveries: 1 reviews inserted, 0 updated (an older version changes nothing)\n',
    );
    const one = await runCli(['webhooks', 'replay', '--id', early.id], env);
    expect(one.stdout).toMatch(/^replayed 1 stored deliveries: 1 reviews inserted/);
    await withMirror(async (db) => {
      const rows = await db
        .knex(db.table('reviews'))
        .whereIn('id', [early.id, late.id])
        .orderBy('created_at');
      expect(rows.map((r) => [r.comment, r.source])).toEqual([
        ['delivered early', 'webhook'],
        ['delivered late', 'webhook'],
      ]);
    });
    const again = await runCli(['webhooks', 'replay'], env);
    expect(again.stdout).toBe(
      'replayed 2 stored deliveries: 0 reviews inserted, 2 updated (an older version changes nothing)\n',
    );

    const missing = await runCli(['webhooks', 'replay', '--id', makeReview().id], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no stored delivery for review/);
    const both = await runCli(['webhooks', 'replay', '--id', early.id, '--since', since], env);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain("option '--since <time>' cannot be used with option '--id <review-id>'");
  });

  // That /readyz ignores the platform's state is test/operate/readiness.test.ts's to show.
  it('says in status whether the platform accepted the API key at the last attempt', async () => {
    const platform = async () => JSON.parse((await runCli(['status', '--json'], env)).stdout).platform;
    expect(await platform()).toMatchObject({ api_key_accepted: true });

    await sandbox.control.deactivateKey(sandbox.apiKey);
    expect((await runCli(['sync', 'locations'], env)).code).toBe(1);
    expect(await platform()).toMatchObject({ api_key_accepted: false, checked_at: expect.any(String) });
    expect((await runCli(['status'], env)).stdout).toContain('platform: API key REFUSED at the last attempt');

    // The platform not reached: nothing is known of the key.
    const down = { ...env, REVIEWS_API_URL: `http://127.0.0.1:${await freePort()}`, API_MAX_RETRIES: '0' };
    expect((await runCli(['sync', 'locations'], down)).code).toBe(1);
    expect(await platform()).toMatchObject({ api_key_accepted: null });

    await sandbox.control.activateKey(sandbox.apiKey);
    expect((await runCli(['sync', 'locations'], env)).code).toBe(0);
    expect((await runCli(['status'], env)).stdout).toContain(
      'platform: API key accepted at the last attempt',
    );
  });
});
