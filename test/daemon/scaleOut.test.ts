import { mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { makeRandom } from '../../src/sandbox/random.js';
import type { StatusReport } from '../../src/status/report.js';
import { CliProcess, freePort, runCli, waitForHttp } from '../helpers/cli.js';
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
const EVENTS_CONCURRENCY = 4;
/** Every job of `run` with a schedule, and its period in seconds here. */
const SCHEDULES = {
  reviews: 2,
  locations: 5,
  professionals: 5,
  'reviews:reconcile': 20,
  'webhook-health': 3,
  'contacts:inbox': 2,
};
/** CRM exports dropped into the shared inbox, and when (fraction of the run; the second after the kill). */
const EXPORTS = [
  { name: 'crm-export-1.csv', at: 0.05 },
  { name: 'crm-export-2.csv', at: 0.4 },
  { name: 'crm-export-3.csv', at: 0.7 },
];
const CONTACTS_PER_EXPORT = 8;

interface Replica {
  env: NodeJS.ProcessEnv;
  httpPort: number;
  adminPort: number;
  process: CliProcess;
}

/** Whether `id` (a `sync_runs.replica`, `job_leases.holder`: host, pid, suffix) names process `pid` here. */
const isReplica = (id: string, pid: number | undefined) => id.startsWith(`${hostname()}:${pid}:`);

/** A CRM export of `CONTACTS_PER_EXPORT` contacts and one row without a valid email (for the report). */
const exportCsv = (file: number) =>
  `external_id,email,name\n${Array.from(
    { length: CONTACTS_PER_EXPORT },
    (_, i) => `crm-${file}-${i},crm${file}.${i}@example.com,Person ${file}.${i}\n`,
  ).join('')}bad-${file},not-an-email,Broken\n`;

/**
 * Three `run` replicas on one schema, for a minute, while reviews arrive, signed webhooks land on
 * replicas drawn at random (seeded, so a failure replays), the partner enqueues events through
 * SQL, CRM exports land in an inbox directory all three share, `review-mirror status` is asked who
 * holds what, and the replica holding the review sync is SIGKILLed and restarted. Once through a
 * real PgBouncer in transaction-pooling mode (the replicas also start, and so migrate, at the same
 * instant through it), once directly.
 */
describe.each([
  ['through a real PgBouncer in transaction-pooling mode', true],
  ['directly on PostgreSQL', false],
])('three `run` replicas %s', (_how, pooled) => {
  let sandbox: TestSandbox;
  let bouncer: RunningPgBouncer | undefined;
  let db: Db | undefined;
  let schema: string | undefined;
  const dirs: string[] = [];
  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 300, seed: 14, allowHttpWebhooks: true });
    if (pooled) bouncer = await startPgBouncer(POSTGRES_URL);
  });
  afterAll(async () => {
    await sandbox?.close();
    await db?.close();
    if (schema) await dropSchema(schema, POSTGRES_URL);
    await bouncer?.close();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('run every job on schedule and never two at once, show who holds what, mirror the platform exactly, send every event once and take every CRM export once', {
    timeout: 300_000,
  }, async () => {
    // One inbox directory for the three replicas: a volume they all mount. The CRM's export job
    // writes each file elsewhere and renames it in, so a file is never seen half-written.
    const inbox = await mkdtemp(join(tmpdir(), 'rm-scale-inbox-'));
    const staging = await mkdtemp(join(tmpdir(), 'rm-scale-export-'));
    dirs.push(inbox, staging);
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
      CRM_INBOX_DIR: inbox,
      CRM_INBOX_CRON: `*/${SCHEDULES['contacts:inbox']} * * * * *`,
      CRM_INBOX_SETTLE_SECONDS: '2',
      CONTACTS_RATE_PER_SECOND: '100',
      EVENTS_CONCURRENCY: String(EVENTS_CONCURRENCY),
      // At least twice the request timeout, which stays above the slow webhook list's 2 s.
      EVENTS_LEASE_SECONDS: '6',
      API_REQUEST_TIMEOUT_SECONDS: '3',
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
      // A slow platform for the webhook list: each webhook-health run lasts two of its three
      // seconds, so `status` finds a lease held (the others are held for milliseconds).
      await sandbox.control.setFaults({
        partner: { routes: ['/api/v1/partner/webhook'], methods: ['GET'], delay: 1, delayMs: 2_000 },
      });

      const random = makeRandom(14);
      const deliveries = replicas.map(() => 0);
      const acknowledged: string[] = [];
      const keys: string[] = [];
      const dropped: string[] = [];
      let killed: { index: number; replica: string } | undefined;
      let status: { report: StatusReport; askedAt: number; answeredAt: number } | undefined;
      const started = Date.now();
      for (let tick = 0; Date.now() - started < DURATION_MS; tick++) {
        // A review arrives; its webhook lands on a live replica drawn at random.
        const [review] = await sandbox.control.submitReviews(sandbox.companyId, [
          { comment: `tick ${tick}` },
        ]);
        const live = replicas.map((_, i) => i).filter((i) => i !== killed?.index);
        const target = live[Math.floor(random() * live.length)]!;
        deliveries[target]!++;
        const delivery = signedDelivery(SECRET, review!);
        const res = await fetch(`http://127.0.0.1:${replicas[target]!.httpPort}/webhooks/review-created`, {
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
        const elapsed = Date.now() - started;
        // The CRM drops an export into the shared inbox (the second once the kill is over).
        const next = EXPORTS[dropped.length];
        if (next && elapsed > DURATION_MS * next.at && (dropped.length !== 1 || killed !== undefined)) {
          await writeFile(join(staging, next.name), exportCsv(dropped.length + 1));
          await rename(join(staging, next.name), join(inbox, next.name));
          dropped.push(next.name);
        }
        // A third of the way in, the replica running the review sync dies, and comes back later.
        // Not while an export waits in the inbox: a push cut off resends its requests in flight
        // (docs/push.md), and this test counts every contact the platform receives.
        const inboxIdle = async () => (await readdir(inbox)).every((n) => !n.endsWith('.csv'));
        if (killed === undefined && elapsed > DURATION_MS / 3 && (await inboxIdle())) {
          // The holder of the lease while a run is under way: the one to kill.
          const holder = await waitFor(
            async () =>
              (await mirror
                .knex(mirror.table('job_leases'))
                .where({ job: 'reviews' })
                .andWhere('expires_at', '>', mirror.knex.fn.now())
                .first('holder')) as { holder: string } | undefined,
            30_000,
            10,
          );
          const index = replicas.findIndex((r) => isReplica(holder.holder, r.process.child.pid));
          expect(
            index,
            `the review sync's holder ${holder.holder} is none of the replicas`,
          ).toBeGreaterThanOrEqual(0);
          replicas[index]!.process.kill('SIGKILL');
          await replicas[index]!.process.exited;
          killed = { index, replica: holder.holder };
        } else if (killed !== undefined && killed.index >= 0 && elapsed > DURATION_MS / 2) {
          const r = replicas[killed.index]!;
          r.process = new CliProcess(['run'], r.env);
          await waitForHttp(`http://127.0.0.1:${r.adminPort}/readyz`, 60_000);
          killed = { index: -1, replica: killed.replica };
        } else if (killed?.index === -1 && status === undefined && elapsed > DURATION_MS * 0.6) {
          // The operator asks who runs what: the real CLI, through the same URL as the replicas.
          let leases: unknown;
          status = await waitFor(
            async () => {
              const askedAt = Date.now();
              const result = await runCli(['status', '--json'], replicas[0]!.env);
              expect(result.code, result.stderr).toBe(0);
              const report = JSON.parse(result.stdout) as StatusReport;
              const held = report.jobs.some((j) => j.held_by !== null);
              leases = await mirror.knex(mirror.table('job_leases')).select('job', 'holder', 'expires_at');
              return held && { report, askedAt, answeredAt: Date.now() };
            },
            30_000,
            0,
          ).catch((error: unknown) => {
            throw new Error(`status never showed a job held; the leases: ${JSON.stringify(leases)}`, {
              cause: error,
            });
          });
        }
        await sleep(500);
      }
      expect(killed?.index).toBe(-1); // killed and restarted
      expect(dropped).toEqual(EXPORTS.map((e) => e.name));
      expect(acknowledged.length).toBeGreaterThan(50);
      expect(
        deliveries.every((n) => n > 0),
        `webhooks per replica: ${deliveries}`,
      ).toBe(true);

      // `status` named, for every job running then, one of the live replicas and a lease ending
      // after it was asked and at most one lease period after it answered.
      expect(status).toBeDefined();
      const { report, askedAt, answeredAt } = status!;
      const pids = replicas.map((r) => r.process.child.pid);
      const held = report.jobs.filter((j) => j.held_by !== null);
      console.info(
        `${pooled ? 'pooled' : 'direct'}: status showed ${held.map((j) => `${j.job} held by ${j.held_by} until ${j.held_until}`).join(', ')}`,
      );
      for (const job of held) {
        const holder = job.held_by!;
        expect({ job: job.job, holder, live: pids.some((pid) => isReplica(holder, pid)) }).toEqual({
          job: job.job,
          holder,
          live: true,
        });
        expect(holder).not.toBe(killed?.replica);
        const until = new Date(job.held_until!).getTime();
        expect(until).toBeGreaterThan(askedAt);
        expect(until).toBeLessThanOrEqual(answeredAt + LEASE_SECONDS * 1000);
        const ran = await mirror
          .knex(mirror.table('sync_runs'))
          .where({ job: job.job, replica: holder })
          .first('id');
        expect(ran, `${job.job} has no run by ${holder}`).toBeDefined();
      }

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

      // Every event reached the platform once by its key. The documented exception: an event whose
      // claim died with the killed replica has an unknown outcome, is sent again and flagged
      // possible_duplicate; it reaches the platform at most once per attempt. Only the killed
      // replica's claims (at most three times its concurrency) can be flagged.
      await waitFor(
        async () =>
          (await mirror.knex(mirror.table('events_outbox')).whereNot({ state: 'sent' }).count())[0]?.count ===
          '0',
        60_000,
        500,
      );
      const flagged = new Map<string, number>(
        (
          await mirror
            .knex(mirror.table('events_outbox'))
            .where({ possible_duplicate: true })
            .select('idempotency_key', 'attempts')
        ).map((r) => [r.idempotency_key as string, Number(r.attempts)]),
      );
      const sent = new Map<string, number>();
      for (const e of (await sandbox.control.truth(sandbox.companyId)).events) {
        const k = String(e.metadata?.k);
        sent.set(k, (sent.get(k) ?? 0) + 1);
      }
      expect([...sent.keys()].filter((k) => !keys.includes(k))).toEqual([]);
      for (const key of keys) {
        const times = sent.get(key) ?? 0;
        const attempts = flagged.get(key);
        if (attempts === undefined) expect({ key, times }).toEqual({ key, times: 1 });
        else
          expect({ key, times, attempts, withinAttempts: times >= 1 && times <= attempts }).toMatchObject({
            withinAttempts: true,
          });
      }
      console.info(
        `${pooled ? 'pooled' : 'direct'}: ${keys.length} events, ${flagged.size} flagged possible_duplicate, ${[...flagged.keys()].filter((k) => (sent.get(k) ?? 0) > 1).length} of them sent twice`,
      );
      expect(flagged.size).toBeLessThanOrEqual(3 * EVENTS_CONCURRENCY);

      // Every CRM export was taken once, by one replica: in processed/ with its report, each
      // contact received by the platform once.
      const processed = join(inbox, 'processed');
      await waitFor(
        async () =>
          (await readdir(processed)).filter((n) => !n.endsWith('.rejects.csv')).length >= EXPORTS.length,
        60_000,
        200,
      );
      expect((await readdir(inbox)).sort()).toEqual(['failed', 'processed', 'processing']);
      expect(await readdir(join(inbox, 'processing'))).toEqual([]);
      expect(await readdir(join(inbox, 'failed'))).toEqual([]);
      expect((await readdir(processed)).sort()).toEqual(
        EXPORTS.flatMap((e) => [e.name, `${e.name}.rejects.csv`]).sort(),
      );
      for (const e of EXPORTS) {
        const report = await readFile(join(processed, `${e.name}.rejects.csv`), 'utf8');
        expect(report).toBe(
          `line,field,reason,key\n${CONTACTS_PER_EXPORT + 2},email,is not an email address,\n`,
        );
      }
      const inboxRuns = await mirror
        .knex(mirror.table('sync_runs'))
        .where({ job: 'contacts:inbox' })
        .pluck('counts');
      const total = (name: string) =>
        inboxRuns.reduce((sum: number, c: Record<string, number> | null) => sum + (c?.[name] ?? 0), 0);
      expect({ processed: total('files_processed'), failed: total('files_failed') }).toEqual({
        processed: EXPORTS.length,
        failed: 0,
      });
      const expected = EXPORTS.flatMap((_, f) =>
        Array.from({ length: CONTACTS_PER_EXPORT }, (_, i) => `crm-${f + 1}-${i}`),
      ).sort();
      const contacts = (await sandbox.control.truth(sandbox.companyId)).contacts.filter((c) =>
        c.external_id?.startsWith('crm-'),
      );
      expect(contacts.map((c) => c.external_id).sort()).toEqual(expected);
      const posts = Object.values(
        (await sandbox.control.requests()).by_route['POST /api/v1/partner/contacts'] ?? {},
      ).reduce((a, b) => a + b, 0);
      expect(posts).toBe(expected.length);

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
