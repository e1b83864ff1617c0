import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { CliProcess, freePort, waitForHttp } from '../helpers/cli.js';
import { daemonSetup } from '../helpers/daemon.js';
import { dropSchema, POSTGRES_URL } from '../helpers/db.js';
import { expectExactMirror } from '../helpers/oracle.js';
import { type RunningPgBouncer, startPgBouncer } from '../helpers/pgbouncer.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
import { signedDelivery } from '../webhooks/helpers.js';

const SECRET = 'whsec_scale_out_test';
const DURATION_MS = 60_000;
const LEASE_SECONDS = 3;
/** Every job of `run` with a schedule, and its period in seconds here. */
const SCHEDULES = {
  reviews: 2,
  locations: 5,
  professionals: 5,
  'reviews:reconcile': 20,
  'webhook-health': 3,
};

interface Replica {
  env: NodeJS.ProcessEnv;
  httpPort: number;
  adminPort: number;
  process: CliProcess;
}

/**
 * Three `run` replicas on one schema, for a minute, while reviews arrive, signed webhooks land on
 * random replicas, the partner enqueues events through SQL, and the replica holding the review
 * sync is SIGKILLed and restarted. Once through a real PgBouncer in transaction-pooling mode (the
 * replicas also start, and so migrate, at the same instant through it), once directly.
 */
describe.each([
  ['through a real PgBouncer in transaction-pooling mode', true],
  ['directly on PostgreSQL', false],
])('three `run` replicas %s', (_how, pooled) => {
  let sandbox: TestSandbox;
  let bouncer: RunningPgBouncer | undefined;
  let db: Db | undefined;
  let schema: string | undefined;
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 300, seed: 14, allowHttpWebhooks: true });
    if (pooled) bouncer = await startPgBouncer(POSTGRES_URL);
  });
  afterAll(async () => {
    await sandbox?.close();
    await db?.close();
    if (schema) await dropSchema(schema, POSTGRES_URL);
    await bouncer?.close();
  });

  it('run every job on schedule and never two at once, mirror the platform exactly, and send every event once', {
    timeout: 240_000,
  }, async () => {
    const setup = await daemonSetup(sandbox, {
      DATABASE_URL: bouncer?.url ?? POSTGRES_URL,
      DB_POOLER: pooled ? 'transaction' : 'none',
      // LISTEN needs a session of its own: the documented direct URL next to the pooler's.
      DATABASE_LISTEN_URL: POSTGRES_URL,
      DB_POOL_MAX: '4',
      JOB_LEASE_SECONDS: String(LEASE_SECONDS),
      SYNC_REVIEWS_CRON: `*/${SCHEDULES.reviews} * * * * *`,
      SYNC_DIRECTORY_CRON: `*/${SCHEDULES.locations} * * * * *`,
      SYNC_RECONCILE_CRON: `*/${SCHEDULES['reviews:reconcile']} * * * * *`,
      WEBHOOK_HEALTH_CRON: `*/${SCHEDULES['webhook-health']} * * * * *`,
      WEBHOOK_SECRETS: SECRET,
      EVENTS_LEASE_SECONDS: '5',
      EVENTS_POLL_SECONDS: '1',
      LOG_LEVEL: 'warn',
    });
    schema = setup.schema;
    setup.env.WEBHOOK_PUBLIC_URL = setup.webhookUrl; // the platform's own deliveries go to the first
    const replicas: Replica[] = [];
    for (let i = 0; i < 3; i++) {
      const httpPort = i === 0 ? setup.httpPort : await freePort();
      const adminPort = i === 0 ? setup.adminPort : await freePort();
      const env = { ...setup.env, HTTP_PORT: String(httpPort), ADMIN_PORT: String(adminPort) };
      replicas.push({ env, httpPort, adminPort, process: undefined as unknown as CliProcess });
    }
    // All three at once, on a schema that does not exist yet: the migrations race.
    for (const r of replicas) r.process = new CliProcess(['run'], r.env);
    try {
      for (const r of replicas) {
        const ready = await waitForHttp(`http://127.0.0.1:${r.adminPort}/readyz`, 60_000);
        expect(ready.status).toBe(200);
      }
      db = await openDb({ url: POSTGRES_URL, schema: setup.schema, poolMax: 2, dataDir: undefined });
      const mirror = db;

      const acknowledged: string[] = [];
      const keys: string[] = [];
      let killed: { index: number; replica: string } | undefined;
      const started = Date.now();
      for (let tick = 0; Date.now() - started < DURATION_MS; tick++) {
        // A review arrives; its webhook lands on a random live replica.
        const [review] = await sandbox.control.submitReviews(sandbox.companyId, [
          { comment: `tick ${tick}` },
        ]);
        const live = replicas.filter((_, i) => i !== killed?.index);
        const target = live[tick % live.length]!;
        const delivery = signedDelivery(SECRET, review!);
        const res = await fetch(`http://127.0.0.1:${target.httpPort}/webhooks/review-created`, {
          method: 'POST',
          headers: delivery.headers,
          body: delivery.body,
        });
        if (res.status === 200) acknowledged.push(review!.id);
        // The partner's application enqueues an event in its own transaction.
        if (tick % 2 === 0) {
          const key = `scale-${tick}`;
          await mirror.knex.raw('select ??(?, ?, ?, ?::jsonb)', [
            `${setup.schema}.enqueue_event`,
            `person${tick}@example.com`,
            'matter.closed',
            key,
            JSON.stringify({ k: key }),
          ]);
          keys.push(key);
        }
        // A third of the way in, the replica running the review sync dies, and comes back later.
        const elapsed = Date.now() - started;
        if (killed === undefined && elapsed > DURATION_MS / 3) {
          const holder = await mirror
            .knex(mirror.table('sync_runs'))
            .where({ job: 'reviews' })
            .orderBy('id', 'desc')
            .first('replica');
          const pids = replicas.map((r) => String(r.process.child.pid));
          const index = Math.max(0, pids.indexOf(String(holder?.replica).split(':')[1] ?? ''));
          replicas[index]!.process.kill('SIGKILL');
          await replicas[index]!.process.exited;
          killed = { index, replica: String(holder?.replica) };
        } else if (killed !== undefined && killed.index >= 0 && elapsed > DURATION_MS / 2) {
          const r = replicas[killed.index]!;
          r.process = new CliProcess(['run'], r.env);
          await waitForHttp(`http://127.0.0.1:${r.adminPort}/readyz`, 60_000);
          killed = { index: -1, replica: killed.replica };
        }
        await sleep(500);
      }
      expect(killed?.index).toBe(-1); // killed and restarted
      expect(acknowledged.length).toBeGreaterThan(50);

      // The mirror catches up with the platform, and every acknowledged webhook is in it.
      await waitFor(
        async () => {
          try {
            await expectExactMirror(mirror, sandbox);
            return true;
          } catch {
            return false;
          }
        },
        60_000,
        500,
      );
      await expectExactMirror(mirror, sandbox);
      const landed = await mirror.knex(mirror.table('reviews')).whereIn('id', acknowledged).pluck('id');
      expect(new Set(landed)).toEqual(new Set(acknowledged));

      // Every event reached the platform once by its key (a send cut off by the kill is the
      // documented exception: flagged possible_duplicate, at most twice).
      await waitFor(
        async () =>
          (await mirror.knex(mirror.table('events_outbox')).whereNot({ state: 'sent' }).count())[0]?.count ===
          '0',
        60_000,
        500,
      );
      const possibleDuplicates = new Set(
        await mirror
          .knex(mirror.table('events_outbox'))
          .where({ possible_duplicate: true })
          .pluck('idempotency_key'),
      );
      const sent = new Map<string, number>();
      for (const e of (await sandbox.control.truth(sandbox.companyId)).events) {
        const k = String(e.metadata?.k);
        sent.set(k, (sent.get(k) ?? 0) + 1);
      }
      for (const key of keys) {
        const times = sent.get(key) ?? 0;
        if (possibleDuplicates.has(key)) expect(times).toBeGreaterThanOrEqual(1);
        else expect({ key, times }).toEqual({ key, times: 1 });
        expect(times).toBeLessThanOrEqual(2);
      }

      // Every job ran on schedule on some replica, never two runs of one job at once, and the
      // replica that took over after the kill is recorded.
      const runs = await mirror
        .knex(mirror.table('sync_runs'))
        .where('started_at', '>=', new Date(started))
        .orderBy(['job', 'started_at', 'id']);
      for (const [job, period] of Object.entries(SCHEDULES)) {
        const mine = runs.filter((r) => r.job === job);
        expect(mine.length).toBeGreaterThanOrEqual(Math.floor(DURATION_MS / 1000 / period / 2));
        for (let i = 1; i < mine.length; i++) {
          const previous = mine[i - 1];
          expect(previous.finished_at, `${job} run ${previous.id} never ended`).not.toBeNull();
          expect(mine[i].started_at.getTime()).toBeGreaterThanOrEqual(previous.finished_at.getTime());
          // No tick lost for long: at worst a dead holder's lease runs out, then the next tick.
          const gap = (mine[i].started_at.getTime() - previous.started_at.getTime()) / 1000;
          expect({ job, gap: gap <= Math.max(period, LEASE_SECONDS) + period + 5 }).toEqual({
            job,
            gap: true,
          });
        }
        expect(mine.every((r) => typeof r.replica === 'string' && r.replica.length > 0)).toBe(true);
      }
      const reviewRunners = new Set(runs.filter((r) => r.job === 'reviews').map((r) => r.replica));
      expect(reviewRunners.size).toBeGreaterThanOrEqual(2);
      expect(runs.filter((r) => r.outcome === 'failed').map((r) => `${r.job}: ${r.error}`)).toEqual([]);
      const leases = await mirror.knex(mirror.table('job_leases')).pluck('job');
      expect(leases.sort()).toEqual(Object.keys(SCHEDULES).sort());
    } finally {
      for (const r of replicas) r.process.kill('SIGTERM');
      const exits = await Promise.all(replicas.map((r) => r.process.exited));
      if (exits.some((e) => /error/i.test(e.stderr) && pooled)) console.error(await bouncer?.log());
    }
  });
});
