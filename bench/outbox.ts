import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger, makeWorkerUtils, runOnce } from 'graphile-worker';
import PQueue from 'p-queue';
import { Pool } from 'undici';
import { type Db, openDb } from '../src/db/connect.js';
import { migrate } from '../src/db/migrate.js';
import { makeLogger, SecretScrubber } from '../src/log.js';
import { DEFAULT_BACKOFF } from '../src/partner-api/retryPolicy.js';
import { OutboxSender } from '../src/push/events/outboxSender.js';
import { OutboxService } from '../src/push/events/outboxService.js';
import { enqueueEvents } from '../src/push/events/outboxSql.js';
import { startSandbox } from '../src/sandbox/server.js';
import { type BenchOptions, type BenchResult, benchApi, quantile } from './harness.js';

const CONCURRENCY = 8;
const LATENCY_SAMPLES = 30;

const log = makeLogger({ level: 'silent', scrubber: new SecretScrubber() });
const scrubber = new SecretScrubber();
const body = (i: number, run: string) => ({
  email: `e${i}@example.com`,
  event_type: 'matter.closed',
  metadata: { run, i },
});
const seconds = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e9;

/**
 * The outbox's throughput and latency. Baseline: a bare loop of the same 10,000 POSTs (500 with --quick), 8 in flight.
 * Subjects: the outbox draining the same number of enqueued events with the same concurrency (claim, send,
 * record each outcome), and — on a PostgreSQL server (BENCH_DATABASE_URL) — graphile-worker 0.17
 * draining as many jobs that make the same POST with the same concurrency, in the same run. Latency:
 * from the commit of an `enqueue_event` transaction to the row recorded as sent, by a worker woken
 * by NOTIFY (PostgreSQL) or the poll (embedded).
 */
export async function benchOutbox(bench: BenchOptions): Promise<BenchResult[]> {
  const url = bench.databaseUrl;
  const events = bench.quick ? 500 : 10_000;
  const sandbox = await startSandbox({ port: 0, seed: 5, seedReviews: 0 });
  const api = benchApi(sandbox);
  const pool = new Pool(sandbox.url, { connections: CONCURRENCY });
  const schema = `bench_outbox_${randomBytes(4).toString('hex')}`;
  const db: Db = await openDb({ url, schema, poolMax: CONCURRENCY + 2, dataDir: undefined });
  try {
    await migrate(db);
    const post = async (payload: unknown) => {
      const res = await pool.request({
        method: 'POST',
        path: '/api/v1/partner/events',
        headers: { 'x-api-key': sandbox.apiKey, 'content-type': 'application/json' },
        body: JSON.stringify(payload),
      });
      await res.body.text();
      if (res.statusCode !== 202) throw new Error(`POST /events answered ${res.statusCode}`);
    };

    const bareStart = process.hrtime.bigint();
    const queue = new PQueue({ concurrency: CONCURRENCY });
    await Promise.all(Array.from({ length: events }, (_, i) => queue.add(() => post(body(i, 'bare')))));
    const bare = seconds(bareStart);

    await enqueueEvents(
      db.knex,
      db,
      Array.from({ length: events }, (_, i) => ({
        key: `bench-${i}`,
        email: `e${i}@example.com`,
        contactId: null,
        eventType: 'matter.closed',
        professionalId: null,
        metadata: { run: 'outbox', i },
        source: 'cli' as const,
      })),
    );
    const sender = new OutboxSender(
      { db, api, log, scrubber },
      {
        worker: 'bench',
        concurrency: CONCURRENCY,
        ratePerSecond: 1_000_000,
        leaseMs: 60_000,
        policy: { unknownOutcome: 'retry', maxAttempts: 5, ...DEFAULT_BACKOFF },
      },
    );
    const outboxStart = process.hrtime.bigint();
    const counts = await sender.drain();
    const outbox = seconds(outboxStart);
    if (counts.sent !== events) throw new Error(`the outbox sent ${counts.sent} of ${events}`);

    let graphile: number | string = 'needs BENCH_DATABASE_URL';
    if (url !== undefined) {
      const gwSchema = `${schema}_gw`;
      const utils = await makeWorkerUtils({
        connectionString: url,
        schema: gwSchema,
        logger: new Logger(() => () => {}),
      });
      try {
        await utils.migrate();
        // One statement adds every job: the same enqueueing cost as the outbox's batch above.
        await utils.withPgClient((client) =>
          client.query(
            `select ${gwSchema}.add_job('send', json_build_object('i', g)) from generate_series(0, $1::int - 1) g`,
            [events],
          ),
        );
        const gwStart = process.hrtime.bigint();
        await runOnce({
          connectionString: url,
          schema: gwSchema,
          concurrency: CONCURRENCY,
          noHandleSignals: true,
          taskList: { send: async (payload) => post(body((payload as { i: number }).i, 'graphile')) },
          logger: new Logger(() => () => {}),
        });
        graphile = seconds(gwStart);
      } finally {
        await utils.withPgClient((client) => client.query(`drop schema if exists ${gwSchema} cascade`));
        await utils.release();
      }
    }

    // Latency of one event in a quiet system, commit to recorded as sent.
    const service = new OutboxService(
      { db, api, log, scrubber },
      {
        concurrency: CONCURRENCY,
        ratePerSecond: 1_000,
        maxAttempts: 5,
        unknownOutcome: 'retry',
        leaseMs: 60_000,
        pollMs: url === undefined ? 50 : 60_000,
        retentionDays: 7,
        keyRetentionDays: 400,
        listenUrl: url,
      },
    );
    service.start();
    const latencies: number[] = [];
    try {
      await sleep(500); // the LISTEN session connects
      for (let i = 0; i < LATENCY_SAMPLES; i++) {
        const key = `latency-${i}`;
        await db.knex.raw('select ??(?, ?, ?)', [
          `${schema}.enqueue_event`,
          `l${i}@example.com`,
          'matter.closed',
          key,
        ]);
        const committed = process.hrtime.bigint();
        for (;;) {
          const row = await db.knex(db.table('events_outbox')).where({ idempotency_key: key }).first('state');
          if (row?.state === 'sent') break;
          await sleep(1);
        }
        latencies.push(seconds(committed) * 1000);
        await sleep(50);
      }
    } finally {
      await service.stop();
    }
    return [
      {
        name: 'events outbox: drain',
        baseline: { label: `${events} bare POSTs, ${CONCURRENCY} in flight`, seconds: bare },
        subject: { label: `outbox drains ${events} events (${db.backend})`, seconds: outbox },
        ratio: outbox / bare,
        details: {
          outbox_events_per_second: Math.round(events / outbox),
          bare_posts_per_second: Math.round(events / bare),
          ...(typeof graphile === 'number'
            ? {
                graphile_worker_seconds: graphile,
                graphile_worker_jobs_per_second: Math.round(events / graphile),
                outbox_vs_graphile_worker: graphile / outbox,
              }
            : { graphile_worker: graphile }),
          commit_to_sent_p50_ms: quantile(latencies, 0.5),
          commit_to_sent_max_ms: Math.max(...latencies),
          woken_by: url === undefined ? 'poll every 50 ms (embedded)' : 'NOTIFY',
        },
      },
    ];
  } finally {
    if (db.backend === 'postgres') await db.knex.raw('drop schema if exists ?? cascade', [schema]);
    await db.close();
    await pool.close();
    await api.close();
    await sandbox.close();
  }
}
