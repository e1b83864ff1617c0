import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { SandboxControl } from '../src/sandbox/controlClient.js';
import {
  type CpuReading,
  cpuAt,
  cpuSpent,
  postgresCpuSeconds,
  processCpuSeconds,
  reapedChildrenCpuSeconds,
} from './cpuAccount.js';
import { type TimedWalk, timedWalk } from './fetchWalk.js';
import { type BenchOptions, type BenchResult, benchApi } from './harness.js';
import { CLI, type CliRun, cliEnv, type NodeCommand, nodeVersion, runCliOk } from './processes.js';
import { type SandboxProcess, startSandboxProcess } from './sandboxProcess.js';

/** The columns a COPY carries: every column of `reviews`, so the copy holds the same rows. */
const COLUMNS = `id, review_number, created_at, rating, comment, is_verified, reviewer_name, reviewer_email,
  professional_id, professional_name, source, first_seen_at, last_seen_at, feed_seen_at, observed_at, removed_at`;

const mb = (bytes: number) => Math.round(bytes / 1e5) / 10;

const FETCH_WALK_PROCESS = fileURLToPath(new URL('./fetchWalkProcess.js', import.meta.url));

/**
 * The V8 flags docs/operations.md gives for a tight container: a small young generation, and old
 * space collected once it doubles what the last collection kept. No hard limit.
 */
const TIGHT_MEMORY_FLAGS = ['--max-semi-space-size=4', '--heap-growing-percent=100'];

/** A second run of the backfill, each into a schema of its own, to read its memory and CPU. */
interface Variant {
  readonly name: string;
  readonly label: string;
  readonly command: NodeCommand;
}

/**
 * The tight-memory flags on this machine's node; and when BENCH_IMAGE_NODE names the Dockerfile's
 * Node line, the sync as the container runs it, with and without those flags.
 */
function variants(imageNode: string | undefined): Variant[] {
  const tight = `with ${TIGHT_MEMORY_FLAGS.join(' ')}`;
  const list: Variant[] = [
    { name: 'tight-memory flags', label: `sync reviews ${tight}`, command: { flags: TIGHT_MEMORY_FLAGS } },
  ];
  if (imageNode !== undefined) {
    const version = nodeVersion(imageNode);
    list.push(
      {
        name: `the image's Node ${version}`,
        label: `sync reviews on ${version}`,
        command: { node: imageNode },
      },
      {
        name: `the image's Node ${version}, tight-memory flags`,
        label: `sync reviews on ${version} ${tight}`,
        command: { node: imageNode, flags: TIGHT_MEMORY_FLAGS },
      },
    );
  }
  return list;
}

/**
 * Issue 15, parts 1 and 2. For each feed size: the sandbox seeded in a process of its own; the
 * API-bound limit (a fetch-only walk of the whole feed with the same client, in the bench
 * process), and the same walk once in a fresh process, as cold as the sync's; `review-mirror sync
 * reviews` as shipped, a separate process, into an empty schema (its speed from its own run
 * record, its peak RSS sampled from /proc); the database-bound limit
 * (COPY of the same rows into an empty copy of the table, indexes included); then two incremental
 * polls of the mirrored feed, with 0 and with 100 new reviews. On the embedded database too, for
 * context (no COPY there).
 */
export async function benchBackfill(options: BenchOptions): Promise<BenchResult[]> {
  const sizes = options.quick ? [2_000] : [100_000, 1_000_000];
  // Asks the image's node its version once, not once per size.
  const others = variants(options.imageNode);
  const results: BenchResult[] = [];
  for (const size of sizes) {
    const sandbox = await startSandboxProcess(CLI, { seed: 1, seedReviews: size });
    try {
      const fetchWalk = await fetchWalkOf(sandbox, size);
      // Here beside the warm walks: after the embedded backfill's writes it once ran 0.5–0.8 s slower.
      const coldWalk = await coldWalkOf(sandbox, size);
      // Embedded first: the server's part ends by adding reviews to the feed.
      const embedded = await backfillEmbedded(sandbox, size, fetchWalk.seconds);
      if (options.databaseUrl !== undefined) {
        results.push(
          ...(await backfillServer(sandbox, size, { fetchWalk, coldWalk }, options.databaseUrl, others)),
        );
      }
      results.push(embedded);
    } finally {
      await sandbox.close();
    }
  }
  return results;
}

/** A fetch-only walk of the whole feed: its time, and the CPU its client and the sandbox spent. */
interface FetchWalk extends TimedWalk {
  readonly sandboxCpu: number;
}

/** What `walk` measured, with the CPU the sandbox spent serving it. */
async function servedBy(sandbox: SandboxProcess, walk: () => Promise<TimedWalk>): Promise<FetchWalk> {
  const before = processCpuSeconds(sandbox.pid) ?? Number.NaN;
  const timed = await walk();
  return { ...timed, sandboxCpu: (processCpuSeconds(sandbox.pid) ?? Number.NaN) - before };
}

/** The faster of two fetch-only walks of the whole feed (the first also warms the sandbox). */
async function fetchWalkOf(sandbox: SandboxProcess, size: number): Promise<FetchWalk> {
  const api = benchApi(sandbox);
  try {
    const walks: FetchWalk[] = [];
    for (let run = 0; run < 2; run++) {
      walks.push(await servedBy(sandbox, () => timedWalk(api, size)));
    }
    return walks.reduce((best, walk) => (walk.seconds < best.seconds ? walk : best));
  } finally {
    await api.close();
  }
}

/**
 * One fetch-only walk in a fresh process (bench/fetchWalkProcess.ts): what a client that is a
 * process of its own, as `sync reviews` is, pays for the walk before its JIT has warmed up.
 */
async function coldWalkOf(sandbox: SandboxProcess, size: number): Promise<FetchWalk> {
  return servedBy(sandbox, async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [FETCH_WALK_PROCESS], {
      env: cliEnv({ SANDBOX_URL: sandbox.url, SANDBOX_API_KEY: sandbox.apiKey, FEED_SIZE: String(size) }),
    });
    return JSON.parse(stdout) as TimedWalk;
  });
}

interface SyncRecord {
  seconds: number;
  /** When the job's run began and ended (epoch ms), as PostgreSQL's clock on this machine read them. */
  startedMs: number;
  finishedMs: number;
  counts: Record<string, number>;
}

/** The `size`-review backfill recorded by the last `reviews` run in `sync_runs`, or an error. */
async function backfillRecord(client: pg.Client, schema: string, size: number): Promise<SyncRecord> {
  const run = await lastRun(client, schema);
  if (run.counts.inserted !== size) throw new Error(`sync inserted ${run.counts.inserted}, expected ${size}`);
  return run;
}

/** The last `reviews` run recorded in `sync_runs`: its duration as the job measured it, and counts. */
async function lastRun(client: pg.Client, schema: string): Promise<SyncRecord> {
  const { rows } = await client.query(
    `select extract(epoch from finished_at - started_at)::float8 as seconds,
            extract(epoch from started_at)::float8 * 1000 as started_ms,
            extract(epoch from finished_at)::float8 * 1000 as finished_ms, counts
       from ${client.escapeIdentifier(schema)}.sync_runs where job = 'reviews' order by id desc limit 1`,
  );
  if (rows.length === 0) throw new Error('no run recorded');
  const [row] = rows;
  return { seconds: row.seconds, startedMs: row.started_ms, finishedMs: row.finished_ms, counts: row.counts };
}

/** A new schema's name on the server, and the environment of a CLI run that mirrors the sandbox into it. */
function freshSchemaEnv(
  sandbox: SandboxProcess,
  databaseUrl: string,
): { schema: string; env: NodeJS.ProcessEnv } {
  const schema = `bench_backfill_${randomBytes(4).toString('hex')}`;
  const env = cliEnv({
    REVIEWS_API_URL: sandbox.url,
    REVIEWS_API_KEY: sandbox.apiKey,
    DATABASE_URL: databaseUrl,
    DB_SCHEMA: schema,
  });
  return { schema, env };
}

async function backfillServer(
  sandbox: SandboxProcess,
  size: number,
  { fetchWalk, coldWalk }: { fetchWalk: FetchWalk; coldWalk: FetchWalk },
  databaseUrl: string,
  others: readonly Variant[],
): Promise<BenchResult[]> {
  const fetchSeconds = fetchWalk.seconds;
  const { schema, env } = freshSchemaEnv(sandbox, databaseUrl);
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const dir = await mkdtemp(join(tmpdir(), 'rm-bench-'));
  try {
    await runCliOk(['migrate'], env); // the schema exists before the timed run, as in production
    const timed = await timedSync(sandbox, client, schema, env, size);
    const { sync, run, cpu } = timed;
    const { seconds: copySeconds, postgresCpu: copyCpu } = await copyOf(
      client,
      schema,
      join(dir, 'reviews.copy'),
    );
    // The least CPU any client could make this backfill cost within its run: the sandbox serving
    // the feed and the client reading and validating it (the fetch-only walk, warmed up), and
    // PostgreSQL storing the rows at COPY's cost.
    const floorCpu = fetchWalk.clientCpu + fetchWalk.sandboxCpu + copyCpu;
    // The same for a client that is a process of its own, as the sync is: its walk runs cold.
    const coldFloorCpu = coldWalk.clientCpu + coldWalk.sandboxCpu + copyCpu;
    // Part 2 begins here: a poll of the mirrored feed, which re-reads the overlap window below the
    // newest review and writes nothing new.
    const idle = await runCliOk(['sync', 'reviews'], env);
    const idleRun = await lastRun(client, schema);

    const limitSeconds = Math.max(fetchSeconds, copySeconds);
    const backfill: BenchResult = {
      name: `backfill ${size.toLocaleString('en')} reviews`,
      baseline: {
        label: `limit: the slower of a fetch-only walk (${perSecond(size, fetchSeconds)}/s) and COPY (${perSecond(size, copySeconds)}/s)`,
        seconds: limitSeconds,
      },
      subject: { label: 'sync reviews (a process) into postgres', seconds: run.seconds },
      ratio: run.seconds / limitSeconds,
      details: {
        reviews: size,
        speed_vs_limit: limitSeconds / run.seconds,
        sync_reviews_per_second: size / run.seconds,
        fetch_reviews_per_second: size / fetchSeconds,
        copy_reviews_per_second: size / copySeconds,
        process_seconds: sync.seconds,
        peak_rss_mb: mb(sync.peakRssBytes),
        // Where the time went: every process shares the same cores.
        cpu_sandbox_s: cpu.sandbox ?? Number.NaN,
        cpu_sync_s: cpu.sync ?? Number.NaN,
        cpu_postgres_s: cpu.postgres ?? Number.NaN,
        cpu_postgres_copy_s: copyCpu,
        cpu_sync_before_run_s: timed.syncBeforeRun,
        cpu_sync_in_run_s: timed.syncInRun,
        overlap_bound_vs_limit: overlapBound(limitSeconds, timed),
        cpu_fetch_walk_client_s: fetchWalk.clientCpu,
        cpu_fetch_walk_sandbox_s: fetchWalk.sandboxCpu,
        // The same bound for the leanest client (floorCpu): above it, no client reaches it here.
        floor_bound_vs_limit: limitSeconds / (floorCpu / availableParallelism()),
        cold_walk_reviews_per_second: size / coldWalk.seconds,
        cpu_cold_walk_client_s: coldWalk.clientCpu,
        cpu_cold_walk_sandbox_s: coldWalk.sandboxCpu,
        // And for the leanest client that starts cold, as every `sync reviews` process does.
        cold_floor_bound_vs_limit: limitSeconds / (coldFloorCpu / availableParallelism()),
      },
    };

    const second: BenchResult[] = [];
    for (const variant of others) {
      second.push(await variantBackfill(sandbox, size, databaseUrl, limitSeconds, client, variant));
    }

    await new SandboxControl(sandbox.url).submitReviews(
      sandbox.companyId,
      Array.from({ length: 100 }, (_, i) => ({ comment: `incremental bench ${i}` })),
    );
    const fresh = await runCliOk(['sync', 'reviews'], env);
    const freshRun = await lastRun(client, schema);
    if (freshRun.counts.inserted !== 100)
      throw new Error(`poll inserted ${freshRun.counts.inserted}, not 100`);
    const onePage = await onePageSeconds(sandbox);
    const poll = (label: string, record: SyncRecord, process: { seconds: number }): BenchResult => ({
      name: `incremental poll of ${size.toLocaleString('en')}, ${label}`,
      baseline: { label: 'one page GET of the feed', seconds: onePage },
      subject: { label: 'sync reviews (its run)', seconds: record.seconds },
      ratio: record.seconds / onePage,
      details: {
        requests: record.counts.pages ?? 0,
        inserted: record.counts.inserted ?? 0,
        run_ms: record.seconds * 1000,
        process_seconds: process.seconds,
      },
    });
    return [backfill, ...second, poll('0 new', idleRun, idle), poll('100 new', freshRun, fresh)];
  } finally {
    await client.query(`drop schema if exists ${client.escapeIdentifier(schema)} cascade`);
    await client.end();
    await rm(dir, { recursive: true, force: true });
  }
}

/** A timed `sync reviews` backfill: the process, its run's record, and the CPU each process spent. */
interface TimedSync {
  readonly sync: CliRun;
  readonly run: SyncRecord;
  /** What the sandbox, the sync and PostgreSQL spent from the sync's start to its end. */
  readonly cpu: Record<string, number>;
  /** The sync's CPU before its run began (loading its modules, connecting, taking the lease). */
  readonly syncBeforeRun: number;
  /** The sync's CPU within its run, which its speed is measured over. */
  readonly syncInRun: number;
}

/**
 * `sync reviews` of the whole feed into `schema` (migrated, empty), from a checkpoint so that it
 * does not pay for the WAL of what ran before it (COPY right after the sync's million rows took a
 * third more CPU: docs/benchmarks.md).
 */
async function timedSync(
  sandbox: SandboxProcess,
  client: pg.Client,
  schema: string,
  env: NodeJS.ProcessEnv,
  size: number,
  command?: NodeCommand,
): Promise<TimedSync> {
  await client.query('checkpoint');
  const cpuBefore = cpuReading(sandbox.pid);
  const sync = await runCliOk(['sync', 'reviews'], env, command);
  const cpu = cpuSpent(cpuBefore, cpuReading(sandbox.pid));
  const run = await backfillRecord(client, schema, size);
  const syncBeforeRun = cpuAt(sync.cpuSamples, run.startedMs) ?? Number.NaN;
  const syncInRun = (cpuAt(sync.cpuSamples, run.finishedMs) ?? Number.NaN) - syncBeforeRun;
  return { sync, run, cpu, syncBeforeRun, syncInRun };
}

/**
 * The best speed_vs_limit the CPU spent within the run allows on this machine's cores, were all of
 * it overlapped. The sync's speed is its run's, so what it spent before the run began takes none
 * of the cores from it; the sandbox serves nothing before the run, and PostgreSQL's few statements
 * before it (the lease, the run's row) are counted with the run. NaN unless all three were read (a
 * database on another machine has no /proc here).
 */
function overlapBound(limitSeconds: number, { cpu, syncInRun }: TimedSync): number {
  const runCpu = (cpu.sandbox ?? Number.NaN) + syncInRun + (cpu.postgres ?? Number.NaN);
  return limitSeconds / (runCpu / availableParallelism());
}

/**
 * The same backfill, into a schema of its own, by `sync reviews` run as `variant` says: its peak
 * memory, its CPU and the bound that CPU allows, beside the same limit.
 */
async function variantBackfill(
  sandbox: SandboxProcess,
  size: number,
  databaseUrl: string,
  limitSeconds: number,
  client: pg.Client,
  variant: Variant,
): Promise<BenchResult> {
  const { schema, env } = freshSchemaEnv(sandbox, databaseUrl);
  try {
    await runCliOk(['migrate'], env, variant.command);
    const timed = await timedSync(sandbox, client, schema, env, size, variant.command);
    return {
      name: `backfill ${size.toLocaleString('en')} reviews, ${variant.name}`,
      baseline: { label: 'the same limit', seconds: limitSeconds },
      subject: { label: variant.label, seconds: timed.run.seconds },
      ratio: timed.run.seconds / limitSeconds,
      details: {
        speed_vs_limit: limitSeconds / timed.run.seconds,
        peak_rss_mb: mb(timed.sync.peakRssBytes),
        cpu_sync_s: timed.cpu.sync ?? Number.NaN,
        cpu_sync_in_run_s: timed.syncInRun,
        cpu_sandbox_s: timed.cpu.sandbox ?? Number.NaN,
        cpu_postgres_s: timed.cpu.postgres ?? Number.NaN,
        overlap_bound_vs_limit: overlapBound(limitSeconds, timed),
      },
    };
  } finally {
    await client.query(`drop schema if exists ${client.escapeIdentifier(schema)} cascade`);
  }
}

/**
 * The database-bound limit: the mirrored rows copied out to a file, then timed COPY FROM that file
 * into an empty table like `reviews` (same indexes and constraints), with PostgreSQL's CPU for it
 * (NaN for a database on another machine).
 */
async function copyOf(
  client: pg.Client,
  schema: string,
  file: string,
): Promise<{ seconds: number; postgresCpu: number }> {
  const s = client.escapeIdentifier(schema);
  await pipeline(
    client.query(copyTo(`copy (select ${COLUMNS} from ${s}.reviews) to stdout`)),
    createWriteStream(file),
  );
  await client.query(`create table ${s}.reviews_copy (like ${s}.reviews including all)`);
  await client.query('checkpoint');
  const cpuBefore = postgresCpuSeconds();
  const start = process.hrtime.bigint();
  await pipeline(
    createReadStream(file),
    client.query(copyFrom(`copy ${s}.reviews_copy (${COLUMNS}) from stdin`)),
  );
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const cpuAfter = postgresCpuSeconds();
  return {
    seconds,
    postgresCpu: cpuBefore === undefined || cpuAfter === undefined ? Number.NaN : cpuAfter - cpuBefore,
  };
}

/** The median time of one GET of the feed's first page: the least any poll costs. */
async function onePageSeconds(sandbox: SandboxProcess): Promise<number> {
  const api = benchApi(sandbox);
  try {
    const times: number[] = [];
    for (let i = 0; i < 21; i++) {
      const start = process.hrtime.bigint();
      await api.reviews.page({ since: null, cursor: null });
      times.push(Number(process.hrtime.bigint() - start) / 1e9);
    }
    return times.sort((a, b) => a - b)[10]!;
  } finally {
    await api.close();
  }
}

async function backfillEmbedded(
  sandbox: SandboxProcess,
  size: number,
  fetchSeconds: number,
): Promise<BenchResult> {
  const dataDir = await mkdtemp(join(tmpdir(), 'rm-bench-embedded-'));
  try {
    const env = cliEnv({ REVIEWS_API_URL: sandbox.url, REVIEWS_API_KEY: sandbox.apiKey, DATA_DIR: dataDir });
    await runCliOk(['migrate'], env);
    const sync = await runCliOk(['sync', 'reviews'], env);
    const counts = /fetched=(\d+) inserted=(\d+)/.exec(sync.stdout);
    if (Number(counts?.[2]) !== size) throw new Error(`embedded sync said: ${sync.stdout.trim()}`);
    return {
      name: `backfill ${size.toLocaleString('en')} reviews, embedded`,
      baseline: { label: `fetch-only walk (${perSecond(size, fetchSeconds)}/s)`, seconds: fetchSeconds },
      subject: { label: 'sync reviews (a process) into embedded, whole process', seconds: sync.seconds },
      ratio: sync.seconds / fetchSeconds,
      details: {
        reviews: size,
        speed_vs_limit: fetchSeconds / sync.seconds,
        sync_reviews_per_second: size / sync.seconds,
        peak_rss_mb: mb(sync.peakRssBytes),
      },
    };
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** The sandbox's CPU, the CLI's children's (the sync, once reaped) and PostgreSQL's. */
function cpuReading(sandboxPid: number | undefined): CpuReading {
  return {
    sandbox: processCpuSeconds(sandboxPid),
    sync: reapedChildrenCpuSeconds(),
    postgres: postgresCpuSeconds(),
  };
}

const perSecond = (count: number, seconds: number) => Math.round(count / seconds).toLocaleString('en');
