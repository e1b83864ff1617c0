import { existsSync } from 'node:fs';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { untilAborted } from '../boundedWait.js';
import { type Context, makeContext } from '../context.js';
import { type RunningDaemon, startDaemon } from '../daemon.js';
import { isLockFile, lockDataDir } from '../db/dataDirLock.js';
import { JOB } from '../jobs/jobNames.js';
import { countRatings, countReviews, hasReview } from '../mirror/reviewsSql.js';
import { SandboxControl } from '../sandbox/controlClient.js';
import { startSandbox } from '../sandbox/server.js';
import { listenForShutdown } from '../shutdownSignal.js';
import { formatStatus, readStatus } from '../status/report.js';
import { readLastFinishedRun } from '../status/statusSql.js';
import { ensureRegistration } from '../webhooks/ensure.js';
import { wholeNumberOption } from './wholeNumberOption.js';

/** Marks a directory as the demo's own, so a re-run may wipe it and nothing else ever is. */
const DEMO_MARKER = '.review-mirror-demo';

interface DemoOptions {
  reviews: number;
  live: number;
  dataDir: string;
  logLevel: string;
  keepRunning?: boolean;
}

export function demoCommand(): Command {
  return new Command('demo')
    .description(
      'mirror a sandbox platform into an embedded PostgreSQL: seeded feed by polling, live reviews by webhook',
    )
    .option('--reviews <n>', 'reviews seeded on the sandbox platform', wholeNumberOption(0), 2_000)
    .option(
      '--live <n>',
      'live reviews submitted after the first sync, landing by webhook',
      wholeNumberOption(0),
      3,
    )
    .option(
      '--data-dir <dir>',
      'where the demo keeps its embedded database (wiped at each demo start)',
      './data/demo',
    )
    .option('--log-level <level>', "the daemon's LOG_LEVEL (its JSON logs go to stdout)", 'warn')
    .option('--keep-running', 'keep the sandbox and the daemon running until Ctrl-C')
    .action(async (options: DemoOptions) => runDemo(options));
}

async function runDemo(options: DemoOptions): Promise<void> {
  const dataDir = resolve(options.dataDir);
  await claimDemoDir(dataDir);
  const out = (line = '') => process.stdout.write(`${line}\n`);

  // Kept running, it stops on the first SIGINT or SIGTERM, even one sent while it starts.
  const shutdown = options.keepRunning ? listenForShutdown() : undefined;
  const sandbox = await startSandbox({
    seedReviews: options.reviews,
    seed: 1,
    allowHttpWebhooks: true,
  }).catch((error: unknown) => {
    shutdown?.dispose();
    throw error;
  });
  let daemon: RunningDaemon | undefined;
  try {
    // The demo configures the daemon exactly as an operator would: through its variables. The
    // ports are the system's choice; the webhook is registered once the receiver's is known.
    const ctx = makeContext({
      REVIEWS_API_URL: sandbox.url,
      REVIEWS_API_KEY: sandbox.apiKey,
      DATA_DIR: dataDir,
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      ADMIN_HOST: '127.0.0.1',
      ADMIN_PORT: '0',
      LOG_LEVEL: options.logLevel,
    });
    const started = Date.now();
    daemon = await startDaemon(ctx);
    const running = daemon;
    const { db, webhooks, adminUrl } = daemon;
    out('review-mirror demo');
    out(`  sandbox platform  ${sandbox.url}  (${options.reviews} seeded reviews, API key ${sandbox.apiKey})`);
    out(`  database          embedded PostgreSQL in ${dataDir}`);
    out(`  webhook receiver  ${webhooks.url}`);
    out(`  health, metrics   ${adminUrl}/healthz  ${adminUrl}/metrics`);
    out();

    // Each step may wait a minute or more on a platform that does not answer: a signal ends them
    // at once (the daemon is stopped under the step left behind), not after them.
    const steps = (async () => {
      const firstSync = await waitFor('the first review sync', () =>
        readLastFinishedRun(db.knex, db, JOB.reviews),
      );
      const mirrored = (await countReviews(db.knex, db)).total;
      out(
        `1. first sync (${firstSync.outcome}): ${mirrored} reviews mirrored by polling the feed, ` +
          `${((Date.now() - started) / 1000).toFixed(1)} s after start-up`,
      );

      await registerDemoWebhook(ctx, running);
      const control = new SandboxControl(sandbox.url);
      const latencies: string[] = [];
      for (let i = 1; i <= options.live; i++) {
        const submittedAt = Date.now();
        const [review] = await control.submitReviews(sandbox.companyId, [
          { rating: 4.5, comment: `Live review ${i}: "quick and kind" ✨`, reviewer_name: 'Zoë Demo' },
        ]);
        await waitFor(`live review ${i}`, async () =>
          (await hasReview(db.knex, db, review!.id)) ? true : undefined,
        );
        latencies.push(`${Date.now() - submittedAt} ms`);
      }
      if (options.live > 0) {
        out(
          `2. ${options.live} live reviews submitted on the platform; each landed by webhook in: ${latencies.join(', ')}`,
        );
      }
      out();
      out(formatStatus(await readStatus(db)));
      out();
      out('Ratings in the mirror (select rating, count(*) from review_mirror.reviews group by rating):');
      for (const row of await countRatings(db.knex, db)) out(`  ${row.rating.padStart(4)}  ${row.count}`);

      out();
      out('Look around:');
      out(
        `  SQL               DATA_DIR=${dataDir} npx review-mirror sql   (psql on this mirror, once the demo has stopped; ${shipped('docs/querying.md')})`,
      );
      out(
        `  dashboards        ${shipped('config/grafana/review-mirror.json')} (Prometheus, scraping /metrics above)`,
      );
      out(
        `                    ${shipped('config/grafana/review-mirror-reviews.json')} (PostgreSQL, the mirror itself)`,
      );
      out(
        `  alert rules       ${shipped('config/prometheus/alerts.yml')} (runbook: ${shipped('docs/alerts.md')})`,
      );
    })();
    steps.catch(() => {});
    await untilAborted(steps, shutdown?.signal);
    if (shutdown !== undefined) {
      out();
      out(
        `Running; submit reviews with the sandbox control API (${shipped('docs/sandbox.md')}). Ctrl-C stops.`,
      );
      await shutdown.received;
    } else out('  a live system     npx review-mirror demo --keep-running');
  } finally {
    shutdown?.dispose();
    const clean = await daemon?.stop('demo finished');
    await sandbox.close();
    if (clean === false) process.exitCode = 1;
  }
}

/**
 * A file shipped with review-mirror (the dashboards, the rules, the docs), as a path from the
 * current directory: `config/...` when the demo runs in the repository, as README has it, and a
 * path that still opens when it runs from anywhere else.
 */
function shipped(path: string): string {
  // src/commands/ in the sources, dist/src/commands/ when built.
  for (const up of ['../../', '../../../']) {
    const file = fileURLToPath(new URL(up + path, import.meta.url));
    if (existsSync(file)) return relative(process.cwd(), file) || path;
  }
  return path;
}

/**
 * What WEBHOOK_PUBLIC_URL would do, for the receiver's bound address (known only once it
 * listens): exactly one webhook for it, its secret stored, and the platform's list recorded by
 * a health run (the start-up one listed none), which the webhook gauges are read from.
 */
async function registerDemoWebhook(ctx: Context, daemon: RunningDaemon): Promise<void> {
  const { db, api, webhooks } = daemon;
  if (api === undefined) throw new Error('the demo daemon has no platform client');
  const deps = { api, db, secrets: webhooks.secrets, log: ctx.log };
  await ensureRegistration({ ...deps, haveConfiguredSecrets: false }, webhooks.url);
  await daemon.scheduler.triggerAfresh(JOB.webhookHealth);
  const run = await readLastFinishedRun(db.knex, db, JOB.webhookHealth);
  if (run?.outcome !== 'success') {
    throw new Error(
      `the webhook health check after registering failed (${run?.outcome ?? 'no run'}): see the log`,
    );
  }
}

async function claimDemoDir(dir: string): Promise<void> {
  if (existsSync(dir)) {
    const entries = await readdir(dir);
    if (entries.length > 0 && !entries.includes(DEMO_MARKER)) {
      throw new Error(`${dir} exists and is not a demo directory; choose another with --data-dir`);
    }
    // A demo still running there holds its lock: refused like any second user of the database,
    // never wiped under it.
    const release = await lockDataDir(dir);
    try {
      for (const entry of await readdir(dir)) {
        if (!isLockFile(entry)) await rm(join(dir, entry), { recursive: true, force: true });
      }
    } finally {
      await release();
    }
  }
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, DEMO_MARKER), 'created by `review-mirror demo`; wiped at each demo start\n');
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await probe();
    if (value !== undefined) return value;
    await sleep(20);
  }
  throw new Error(`the demo gave up waiting for ${what} after ${timeoutMs / 1000} s`);
}
