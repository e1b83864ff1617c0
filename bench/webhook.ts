import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Pool } from 'undici';
import { openDb } from '../src/db/connect.js';
import { deliveryHeaders } from '../src/webhooks/signature.js';
import { CommitProbe } from './commitProbe.js';
import { type CpuReading, cpuSpent, postgresCpuSeconds, processCpuSeconds } from './cpuAccount.js';
import { type BenchOptions, type BenchResult, quantile } from './harness.js';
import { parseMetricsText } from './metricsText.js';
import { type Child, CLI, cliEnv, freePort, nodeVersion, spawnChild, spawnUntil } from './processes.js';

const SECRET = 'whsec_bench_secret_0123456789';
const PATH = '/webhooks/review-created';
/** Deliveries in flight at once in the closed loop: a platform fanning out a burst. */
const CLOSED_LOOP_CONCURRENCY = 64;
const BARE_SERVER = fileURLToPath(new URL('./bareHttpServer.js', import.meta.url));
const LEAN_RECEIVER = fileURLToPath(new URL('./leanReceiver.js', import.meta.url));

interface Delivery {
  readonly id: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** A signed review.created delivery of a new review, signed now. */
export function delivery(i: number): Delivery {
  const timestamp = String(Math.floor(Date.now() / 1000));
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
  return { id, body, headers: deliveryHeaders(SECRET, timestamp, body) };
}

/** `count` deliveries, each of a distinct review. */
const deliveries = (count: number): Delivery[] => Array.from({ length: count }, (_, i) => delivery(i));

interface Sent {
  /** Seconds from each delivery's scheduled send (open loop) or actual send (closed loop) to its answer. */
  readonly latencies: number[];
  /** Deliveries sent and settled: answered, whatever the answer, or failed. */
  readonly answered: number;
  /** Ids of the deliveries answered 200. */
  readonly acknowledged: string[];
  readonly refused: number;
  readonly seconds: number;
}

/** A loop that sent all of `batch` and settled every delivery, `acknowledged` the 200s. */
function sentAll(
  batch: readonly Delivery[],
  latencies: number[],
  acknowledged: string[],
  seconds: number,
): Sent {
  return {
    latencies,
    answered: batch.length,
    acknowledged,
    refused: batch.length - acknowledged.length,
    seconds,
  };
}

async function post(pool: Pool, d: Delivery): Promise<boolean> {
  try {
    const response = await pool.request({ method: 'POST', path: PATH, headers: d.headers, body: d.body });
    await response.body.dump();
    return response.statusCode === 200;
  } catch {
    return false;
  }
}

/** Sends every delivery with `concurrency` in flight, each as soon as the one before it is answered. */
async function closedLoop(origin: string, batch: readonly Delivery[], concurrency: number): Promise<Sent> {
  const pool = new Pool(origin, { connections: concurrency });
  const latencies: number[] = [];
  const acknowledged: string[] = [];
  let next = 0;
  const start = performance.now();
  const worker = async () => {
    while (next < batch.length) {
      const d = batch[next++]!;
      const sent = performance.now();
      if (await post(pool, d)) acknowledged.push(d.id);
      latencies.push((performance.now() - sent) / 1000);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - start) / 1000;
  await pool.close();
  return sentAll(batch, latencies, acknowledged, seconds);
}

/**
 * The closed loop as the issue measured it from outside: autocannon, 64 connections for
 * `seconds`, each request a new signed delivery built as it is sent. Much costlier per request
 * than the undici loop above, so on shared cores it leaves the server less CPU.
 */
async function autocannonLoop(origin: string, seconds: number): Promise<Sent> {
  const acknowledged: string[] = [];
  let answered = 0;
  let built = 0;
  const result = await autocannon({
    url: `${origin}${PATH}`,
    connections: CLOSED_LOOP_CONCURRENCY,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        setupRequest: (request, context: { id?: string }) => {
          const d = delivery(built++);
          context.id = d.id; // one request at a time per connection: its answer is this one's
          return { ...request, body: d.body, headers: d.headers };
        },
        onResponse: (status, _body, context: { id?: string }) => {
          answered++;
          if (status === 200 && context.id !== undefined) acknowledged.push(context.id);
        },
      },
    ],
  });
  return {
    latencies: [],
    answered,
    acknowledged,
    refused: answered - acknowledged.length,
    seconds: result.duration,
  };
}

/**
 * Sends delivery i at start + i / rate whatever happened to the others (open loop), and measures
 * each latency from that scheduled time: a stall of the receiver, or of this sender, delays every
 * delivery scheduled behind it and shows in the tail instead of slowing the schedule down.
 */
async function openLoop(origin: string, batch: readonly Delivery[], rate: number): Promise<Sent> {
  const pool = new Pool(origin, { connections: 512 });
  const latencies: number[] = [];
  const acknowledged: string[] = [];
  const answers: Array<Promise<void>> = [];
  const start = performance.now() + 20;
  const at = (i: number) => start + (i * 1000) / rate;
  let next = 0;
  await new Promise<void>((done) => {
    const tick = () => {
      const now = performance.now();
      while (next < batch.length && at(next) <= now) {
        const d = batch[next]!;
        const scheduled = at(next++);
        answers.push(
          post(pool, d).then((ok) => {
            latencies.push((performance.now() - scheduled) / 1000);
            if (ok) acknowledged.push(d.id);
          }),
        );
      }
      if (next < batch.length) setTimeout(tick, Math.max(0, at(next) - performance.now()));
      else done();
    };
    tick();
  });
  await Promise.all(answers);
  const seconds = (performance.now() - start) / 1000;
  await pool.close();
  return sentAll(batch, latencies, acknowledged, seconds);
}

async function waitReady(url: string): Promise<void> {
  for (let tries = 0; tries < 600; tries++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`${url} not ready within 60 s`);
}

interface Target {
  readonly origin: string;
  readonly child: Child;
  /** The daemon's admin port, for its own view of each phase; none for the bare server. */
  readonly adminPort?: number;
}

/** Runs `work` against a target once it has started, then stops the target whatever happened. */
async function withTarget<T>(started: Promise<Target>, work: (target: Target) => Promise<T>): Promise<T> {
  const target = await started;
  try {
    return await work(target);
  } finally {
    await target.child.stop();
  }
}

/** `review-mirror run` as shipped: only the receiver matters here, so no platform is configured. */
async function startDaemon(
  databaseUrl: string | undefined,
  dataDir: string,
  schema: string,
  node?: string,
): Promise<Target> {
  const httpPort = await freePort();
  const adminPort = await freePort();
  const env = cliEnv({
    DATABASE_URL: databaseUrl,
    DATA_DIR: dataDir,
    DB_SCHEMA: schema,
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: String(httpPort),
    ADMIN_HOST: '127.0.0.1',
    ADMIN_PORT: String(adminPort),
    WEBHOOK_SECRETS: SECRET,
    LOG_LEVEL: 'error',
  });
  const child = spawnChild([CLI, 'run'], env, node);
  try {
    await waitReady(`http://127.0.0.1:${adminPort}/readyz`);
  } catch (error) {
    await child.stop();
    throw error;
  }
  return { origin: `http://127.0.0.1:${httpPort}`, child, adminPort };
}

async function startBareServer(node?: string): Promise<Target> {
  const { child, match } = await spawnUntil([BARE_SERVER], cliEnv({}), /listening on (\S+)/, node);
  return { origin: match[1]!, child };
}

/** bench/leanReceiver.ts on `schema`, already migrated (by the daemon). */
async function startLeanReceiver(databaseUrl: string, schema: string): Promise<Target> {
  const env = cliEnv({ DATABASE_URL: databaseUrl, DB_SCHEMA: schema, WEBHOOK_SECRETS: SECRET });
  const { child, match } = await spawnUntil([LEAN_RECEIVER], env, /listening on (\S+)/);
  return { origin: match[1]!, child };
}

/** The closed loop (autocannon) alone against `target`, after the same warm-up. */
async function driveAutocannon(target: Target, options: BenchOptions): Promise<ClosedRun> {
  await closedLoop(target.origin, deliveries(options.quick ? 500 : 2_000), CLOSED_LOOP_CONCURRENCY);
  return withCpu(target.child.process.pid, () => autocannonLoop(target.origin, options.quick ? 1 : 10));
}

/** One scrape of a daemon's /metrics: sample (name with labels) to value. */
async function scrape(adminPort: number): Promise<Map<string, number>> {
  return parseMetricsText(await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text());
}

/**
 * Where a phase's tail came from, as the daemon saw it: its inbox commits (how many, how many
 * slower than 25 and 100 ms), its event loop's longest delay (the gauge resets at every scrape)
 * and its garbage collector's time.
 */
function daemonView(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  const commit = 'review_mirror_webhook_commit_seconds';
  const commits = delta(`${commit}_count`);
  const gc = (kind: string) => delta(`review_mirror_nodejs_gc_duration_seconds_sum{kind="${kind}"}`);
  return {
    commits,
    commit_mean_ms: commits === 0 ? 0 : (delta(`${commit}_sum`) / commits) * 1000,
    commits_over_25ms: commits - delta(`${commit}_bucket{le="0.025"}`),
    commits_over_100ms: commits - delta(`${commit}_bucket{le="0.1"}`),
    event_loop_max_ms: (after.get('review_mirror_nodejs_eventloop_lag_max_seconds') ?? 0) * 1000,
    gc_ms: (gc('minor') + gc('major') + gc('incremental')) * 1000,
  };
}

/** A closed loop and what each process spent on it: the server, PostgreSQL and the load generator. */
interface ClosedRun {
  readonly sent: Sent;
  readonly cpu: Record<string, number>;
}

/** An open-loop phase: deliveries per second, for how long. */
interface OpenPhase {
  readonly rate: number;
  readonly seconds: number;
}

const SHORT_PHASE_SECONDS = 10;

/**
 * Short phases at three rates, then a minute at the 1,000/s: long enough that the kernel
 * writes back the phase's own data pages (every 30 s or so), which a short phase never sees.
 */
const OPEN_PHASES: readonly OpenPhase[] = [
  { rate: 200, seconds: SHORT_PHASE_SECONDS },
  { rate: 1_000, seconds: SHORT_PHASE_SECONDS },
  { rate: 2_000, seconds: SHORT_PHASE_SECONDS },
  { rate: 1_000, seconds: 60 },
];

/** `webhook open loop, 1,000/s`, and the length too when it is not a short phase's. */
function openPhaseName({ rate, seconds }: OpenPhase): string {
  const length = seconds === SHORT_PHASE_SECONDS ? '' : ` for ${seconds} s`;
  return `webhook open loop, ${rate.toLocaleString('en')}/s${length}`;
}

interface Workload {
  /** The yardstick (autocannon), then the bench's own lean undici loop. */
  closed: { autocannon: ClosedRun; undici: ClosedRun };
  /** Each phase's deliveries, and what the daemon saw of it (its metrics, the commit probe). */
  open: Array<{ phase: OpenPhase; sent: Sent; daemon: Record<string, number> }>;
}

function cpuReading(serverPid: number | undefined): CpuReading {
  const own = process.cpuUsage();
  return {
    server: processCpuSeconds(serverPid),
    postgres: postgresCpuSeconds(),
    generator: (own.user + own.system) / 1e6,
  };
}

async function withCpu(serverPid: number | undefined, run: () => Promise<Sent>): Promise<ClosedRun> {
  const before = cpuReading(serverPid);
  const sent = await run();
  return { sent, cpu: cpuSpent(before, cpuReading(serverPid)) };
}

/**
 * Drives `target` through the closed loops, then the open-loop phases; `probe`, when given, starts
 * each open-loop phase from a checkpoint and runs a commit probe of the target's database beside it.
 */
async function drive(
  { origin, adminPort, child }: Target,
  options: BenchOptions,
  probe?: () => Promise<CommitProbe>,
): Promise<Workload> {
  const closedCount = options.quick ? 500 : 20_000;
  const autocannonSeconds = options.quick ? 1 : 10;
  const phases = options.quick ? [{ rate: 200, seconds: 1 }] : OPEN_PHASES;
  const pid = child.process.pid;
  await closedLoop(origin, deliveries(Math.min(2_000, closedCount)), CLOSED_LOOP_CONCURRENCY); // warm-up
  const closed = {
    autocannon: await withCpu(pid, () => autocannonLoop(origin, autocannonSeconds)),
    undici: await withCpu(pid, () => closedLoop(origin, deliveries(closedCount), CLOSED_LOOP_CONCURRENCY)),
  };
  const open: Workload['open'] = [];
  for (const phase of phases) {
    const batch = deliveries(phase.rate * phase.seconds);
    const before = adminPort === undefined ? undefined : await scrape(adminPort);
    const running = await probe?.();
    let sent: Sent;
    try {
      sent = await openLoop(origin, batch, phase.rate);
    } catch (error) {
      // Its connection closed all the same; the phase's failure is the one worth reporting.
      await running?.stop().catch(() => {});
      throw error;
    }
    const probed = (await running?.stop()) ?? {};
    const daemon =
      adminPort === undefined || before === undefined ? {} : daemonView(before, await scrape(adminPort));
    open.push({ phase, sent, daemon: { ...daemon, ...probed } });
  }
  return { closed, open };
}

/**
 * A closed loop's throughput beside the bare server's under the same generator, with the CPU each
 * process spent per delivery. On shared cores the generator's cost per request sets how much CPU
 * is left to the server, so `cpu_bound_vs_bare` is the throughput share the receiver would reach
 * if both runs kept the cores equally busy: the bare run's CPU per request over the receiver's.
 * `floor_bound_vs_bare` is the same bound for a receiver that cost no more than the bare server
 * yet still had PostgreSQL store each delivery as this run did: what no receiver that commits
 * before it answers could pass with this generator on these cores.
 */
function closedResult(name: string, subject: ClosedRun, bare: ClosedRun, subjectLabel: string): BenchResult {
  const rate = (run: ClosedRun) => run.sent.answered / run.sent.seconds;
  const us = (run: ClosedRun, part: string) => ((run.cpu[part] ?? Number.NaN) / run.sent.answered) * 1e6;
  const busy = (run: ClosedRun) =>
    Object.values(run.cpu).reduce((sum, seconds) => sum + seconds, 0) / run.sent.seconds;
  const subjectUs = us(subject, 'server') + us(subject, 'postgres') + us(subject, 'generator');
  const bareUs = us(bare, 'server') + us(bare, 'generator');
  const floorUs = us(bare, 'server') + us(subject, 'postgres') + us(subject, 'generator');
  return {
    name,
    baseline: { label: `bare node:http, ${Math.round(rate(bare))}/s, per delivery`, seconds: 1 / rate(bare) },
    subject: {
      label: `${subjectLabel}, ${Math.round(rate(subject))}/s, per delivery`,
      seconds: 1 / rate(subject),
    },
    ratio: rate(bare) / rate(subject),
    details: {
      throughput_vs_bare: rate(subject) / rate(bare),
      deliveries_per_second: rate(subject),
      bare_per_second: rate(bare),
      refused: subject.sent.refused,
      receiver_cpu_us: us(subject, 'server'),
      postgres_cpu_us: us(subject, 'postgres'),
      generator_cpu_us: us(subject, 'generator'),
      bare_server_cpu_us: us(bare, 'server'),
      bare_generator_cpu_us: us(bare, 'generator'),
      cores_busy: busy(subject),
      bare_cores_busy: busy(bare),
      cpu_bound_vs_bare: bareUs / subjectUs,
      floor_bound_vs_bare: bareUs / floorUs,
    },
  };
}

/** How many of `ids` are in both the inbox and the reviews table. */
async function countStored(
  databaseUrl: string | undefined,
  dataDir: string,
  schema: string,
  ids: readonly string[],
): Promise<number> {
  const db = await openDb({ url: databaseUrl, schema, poolMax: 1, dataDir });
  try {
    const { rows } = await db.knex.raw(
      `select count(*)::int as n from ?? r join ?? i on i.review_id = r.id where r.id = any(?::uuid[])`,
      [db.table('reviews'), db.table('webhook_inbox'), [...ids]],
    );
    return (rows as Array<{ n: number }>)[0]!.n;
  } finally {
    await db.close();
  }
}

/** The autocannon closed loop against the bare server and the daemon, both run by `node`. */
interface ImageNodeRun {
  readonly version: string;
  readonly bare: ClosedRun;
  readonly daemon: ClosedRun;
}

async function onImageNode(
  node: string,
  options: BenchOptions,
  databaseUrl: string,
  dataDir: string,
  schema: string,
): Promise<ImageNodeRun> {
  const autocannonOn = (target: Target) => driveAutocannon(target, options);
  return {
    version: nodeVersion(node),
    bare: await withTarget(startBareServer(node), autocannonOn),
    daemon: await withTarget(startDaemon(databaseUrl, dataDir, schema, node), autocannonOn),
  };
}

const ms = (seconds: number) => seconds * 1000;

/**
 * Issue 15, part 3: signed deliveries to `review-mirror run` (a separate process, on the
 * PostgreSQL server of BENCH_DATABASE_URL, else embedded), against the same workloads sent to a
 * bare node:http server process that only reads the body and answers 200. Closed loop, 64
 * connections: throughput under autocannon (how the issue measured it), then under the bench's
 * own leaner undici sender, each with the CPU per delivery of the server, PostgreSQL and the
 * generator. Open loop at 200, 1,000 and 2,000 deliveries/s for 10 s each, then 1,000/s for a
 * minute: latency from each delivery's scheduled send. On a PostgreSQL server, the autocannon loop
 * once more against the lean receiver (bench/leanReceiver.ts): the same work without the daemon
 * around it, and each open-loop phase from a checkpoint with a commit probe beside it
 * (bench/commitProbe.ts): the database's own commit latency at the same time;
 * and with BENCH_IMAGE_NODE, the autocannon loop against the bare server and the daemon both run by
 * the image's Node line. Then every delivery a receiver acknowledged must be in the inbox and the
 * reviews table (a 200 means committed).
 */
export async function benchWebhook(options: BenchOptions): Promise<BenchResult[]> {
  const baseline = await withTarget(startBareServer(), (bare) => drive(bare, options));

  const schema = `bench_webhook_${randomBytes(4).toString('hex')}`;
  const dataDir = await mkdtemp(join(tmpdir(), 'rm-bench-webhook-'));
  const { databaseUrl, imageNode } = options;
  const backend = databaseUrl === undefined ? 'embedded' : 'postgres';
  try {
    const subject = await withTarget(startDaemon(databaseUrl, dataDir, schema), (daemon) =>
      drive(
        daemon,
        options,
        databaseUrl === undefined ? undefined : () => CommitProbe.start(databaseUrl, schema),
      ),
    );
    // The lean receiver writes into the same schema, once the daemon has stopped.
    const lean =
      databaseUrl === undefined
        ? undefined
        : await withTarget(startLeanReceiver(databaseUrl, schema), (receiver) =>
            driveAutocannon(receiver, options),
          );
    // The image's Node line (BENCH_IMAGE_NODE) runs the bare server and the daemon once more, under
    // the closed loop: the ratio production's pairing gets.
    const image =
      imageNode !== undefined && databaseUrl !== undefined
        ? await onImageNode(imageNode, options, databaseUrl, dataDir, schema)
        : undefined;
    const acknowledged = [
      subject.closed.autocannon.sent,
      subject.closed.undici.sent,
      ...subject.open.map((o) => o.sent),
      ...(lean ? [lean.sent] : []),
      ...(image ? [image.daemon.sent] : []),
    ].flatMap((s) => s.acknowledged);
    const stored = await countStored(databaseUrl, dataDir, schema, acknowledged);
    if (stored !== acknowledged.length) {
      throw new Error(`${acknowledged.length - stored} acknowledged deliveries are not in the mirror`);
    }

    const daemonLabel = `run on ${backend}, verified and committed`;
    const closed = [
      closedResult(
        `webhook closed loop, ${CLOSED_LOOP_CONCURRENCY} connections, autocannon (the issue's yardstick)`,
        subject.closed.autocannon,
        baseline.closed.autocannon,
        daemonLabel,
      ),
      closedResult(
        `webhook closed loop, ${CLOSED_LOOP_CONCURRENCY} in flight, lean undici sender`,
        subject.closed.undici,
        baseline.closed.undici,
        daemonLabel,
      ),
    ];
    if (lean) {
      const result = closedResult(
        `webhook closed loop, ${CLOSED_LOOP_CONCURRENCY} connections, autocannon, the lean receiver`,
        lean,
        baseline.closed.autocannon,
        'node:http, the same verification, validation and group commit; no framework, metrics or logs',
      );
      const run = subject.closed.autocannon.sent;
      result.details.throughput_vs_run =
        lean.sent.answered / lean.sent.seconds / (run.answered / run.seconds);
      closed.push(result);
    }
    if (image) {
      closed.push(
        closedResult(
          `webhook closed loop, ${CLOSED_LOOP_CONCURRENCY} connections, autocannon, on the image's Node ${image.version}`,
          image.daemon,
          image.bare,
          `${daemonLabel}, on ${image.version} (the bare server too)`,
        ),
      );
    }
    const open = subject.open.map(({ phase, sent, daemon: seen }, i): BenchResult => {
      const bareSent = baseline.open[i]!.sent;
      return {
        name: openPhaseName(phase),
        baseline: { label: 'bare node:http, p99', seconds: quantile(bareSent.latencies, 0.99) },
        subject: { label: `run on ${backend}, p99`, seconds: quantile(sent.latencies, 0.99) },
        ratio: quantile(sent.latencies, 0.99) / quantile(bareSent.latencies, 0.99),
        details: {
          deliveries: sent.latencies.length,
          p50_ms: ms(quantile(sent.latencies, 0.5)),
          p99_ms: ms(quantile(sent.latencies, 0.99)),
          max_ms: ms(Math.max(...sent.latencies)),
          refused: sent.refused,
          bare_p50_ms: ms(quantile(bareSent.latencies, 0.5)),
          bare_p99_ms: ms(quantile(bareSent.latencies, 0.99)),
          bare_max_ms: ms(Math.max(...bareSent.latencies)),
          ...seen,
        },
      };
    });
    return [...closed, ...open];
  } finally {
    if (databaseUrl !== undefined) {
      const db = await openDb({ url: databaseUrl, schema, poolMax: 1, dataDir: undefined });
      await db.knex.raw('drop schema if exists ?? cascade', [schema]);
      await db.close();
    }
    await rm(dataDir, { recursive: true, force: true });
  }
}
