import { randomBytes, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { Pool } from 'undici';
import { type Db, openDb } from '../src/db/connect.js';
import { migrate } from '../src/db/migrate.js';
import { makeLogger, SecretScrubber } from '../src/log.js';
import { makeMetrics } from '../src/metrics.js';
import { Inbox } from '../src/webhooks/inbox.js';
import { makeWebhookServer } from '../src/webhooks/server.js';
import { deliveryHeaders } from '../src/webhooks/signature.js';
import { type BenchResult, quantile } from './harness.js';

const DELIVERIES = 2_000;
/** Deliveries in flight at once: a platform fanning out a burst. */
const CONCURRENCY = 64;
const RUNS = 3;
const SECRET = 'whsec_bench_secret_0123456789';
const PATH = '/webhooks/review-created';

interface Prepared {
  headers: Record<string, string>;
  body: string;
}

/** A burst of signed review.created deliveries, each a distinct review. */
function prepareBurst(): Prepared[] {
  const timestamp = String(Math.floor(Date.now() / 1000));
  return Array.from({ length: DELIVERIES }, (_, i) => {
    const id = randomUUID();
    const body = JSON.stringify({
      event: 'review.created',
      timestamp,
      data: {
        id,
        review_number: `R-${id.replaceAll('-', '').slice(0, 8).toUpperCase()}`,
        created_at: new Date().toISOString(),
        rating: 1 + (i % 5),
        comment: `benchmark review ${i} `.repeat(8),
        is_verified: true,
        reviewer: { name: 'Bench Reviewer', email: 'bench@example.com' },
        professional: { id: null, name: null },
      },
    });
    return {
      body,
      headers: deliveryHeaders(SECRET, timestamp, body),
    };
  });
}

/** Sends the burst with CONCURRENCY in flight; returns total seconds and each delivery's latency. */
async function sendBurst(
  url: string,
  burst: readonly Prepared[],
): Promise<{ seconds: number; latencies: number[] }> {
  const target = new URL(url);
  const pool = new Pool(target.origin, { connections: CONCURRENCY });
  const latencies: number[] = [];
  let next = 0;
  const start = process.hrtime.bigint();
  const worker = async () => {
    while (next < burst.length) {
      const d = burst[next++]!;
      const sent = process.hrtime.bigint();
      const res = await pool.request({
        method: 'POST',
        path: target.pathname,
        headers: d.headers,
        body: d.body,
      });
      await res.body.dump();
      if (res.statusCode !== 200) throw new Error(`delivery answered ${res.statusCode}`);
      latencies.push(Number(process.hrtime.bigint() - sent) / 1e9);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  await pool.close();
  return { seconds, latencies };
}

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}${PATH}`;
}

const median = (values: number[]) => quantile(values, 0.5);

/**
 * The receiver's cost over HTTP alone: baseline = the same burst of signed deliveries to a
 * trivial endpoint that reads the body and answers 200; subject = the real receiver verifying
 * each signature and answering only after its delivery committed (group commit) to a fresh
 * schema. The subject's latencies are delivery-to-commit times as the platform sees them.
 * Real PostgreSQL when BENCH_DATABASE_URL is set, else in-memory PGlite.
 */
export async function benchWebhook(): Promise<BenchResult> {
  const databaseUrl = process.env.BENCH_DATABASE_URL || undefined;
  const log = makeLogger({ level: 'silent', scrubber: new SecretScrubber() });

  const trivial = Fastify({ logger: false, bodyLimit: 1024 * 1024 });
  trivial.removeAllContentTypeParsers();
  trivial.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_r, body, done) =>
    done(null, body),
  );
  trivial.post(PATH, async () => ({ status: 'accepted' }));
  const baselineTimes: number[] = [];
  const baselineLatencies: number[] = [];
  try {
    const url = await listen(trivial);
    await sendBurst(url, prepareBurst()); // warm-up
    for (let run = 0; run < RUNS; run++) {
      const result = await sendBurst(url, prepareBurst());
      baselineTimes.push(result.seconds);
      baselineLatencies.push(...result.latencies);
    }
  } finally {
    await trivial.close();
  }

  const schema = `bench_webhook_${randomBytes(4).toString('hex')}`;
  const db: Db = await openDb({ url: databaseUrl, schema, poolMax: 4, dataDir: undefined });
  const metrics = makeMetrics();
  const inbox = new Inbox({ db, log, metrics });
  const receiver = makeWebhookServer({
    path: PATH,
    toleranceSeconds: 300,
    maxBodyBytes: 1024 * 1024,
    secrets: () => [SECRET],
    inbox,
    log,
    metrics,
  });
  const subjectTimes: number[] = [];
  const subjectLatencies: number[] = [];
  try {
    await migrate(db);
    const url = await listen(receiver);
    await sendBurst(url, prepareBurst()); // warm-up
    for (let run = 0; run < RUNS; run++) {
      const result = await sendBurst(url, prepareBurst());
      subjectTimes.push(result.seconds);
      subjectLatencies.push(...result.latencies);
    }
    const stored = Number((await db.knex(db.table('reviews')).count({ n: '*' }))[0]!.n);
    if (stored !== DELIVERIES * (RUNS + 1)) throw new Error(`stored ${stored} reviews`);
  } finally {
    await receiver.close();
    await inbox.close();
    if (db.backend === 'postgres') await db.knex.raw('drop schema if exists ?? cascade', [schema]);
    await db.close();
  }

  const batches = (await metrics.webhookBatchSize.get()).values;
  const batchCount = batches.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
  const batchSum = batches.find((v) => v.metricName?.endsWith('_sum'))?.value ?? 0;
  const baseline = median(baselineTimes);
  const subject = median(subjectTimes);
  return {
    name: 'webhook burst',
    baseline: { label: `${DELIVERIES} deliveries to a trivial 200 endpoint`, seconds: baseline },
    subject: { label: `${DELIVERIES} deliveries verified and committed`, seconds: subject },
    ratio: subject / baseline,
    details: {
      backend: db.backend,
      concurrency: CONCURRENCY,
      deliveries_per_second: DELIVERIES / subject,
      commit_latency_p50_ms: quantile(subjectLatencies, 0.5) * 1000,
      commit_latency_p99_ms: quantile(subjectLatencies, 0.99) * 1000,
      baseline_latency_p50_ms: quantile(baselineLatencies, 0.5) * 1000,
      baseline_latency_p99_ms: quantile(baselineLatencies, 0.99) * 1000,
      mean_batch_size: batchCount === 0 ? 0 : batchSum / batchCount,
    },
  };
}
