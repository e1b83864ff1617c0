import { setTimeout as sleep } from 'node:timers/promises';
import { MirrorGauges } from './admin/mirrorGauges.js';
import { makeAdminServer } from './admin/server.js';
import { untilAborted } from './boundedWait.js';
import { type Context, runnerDeps } from './context.js';
import { type Db, dbOptionsFromConfig, openDb } from './db/connect.js';
import { migrate } from './db/migrate.js';
import { describeError } from './errors.js';
import { Scheduler } from './jobs/scheduler.js';
import { type Metrics, makeMetrics } from './metrics.js';
import { makePartnerApi, type PartnerApi, partnerApiOptions } from './partner-api/client.js';
import { pullJobSpecs } from './pull/jobs.js';
import { OutboxService } from './push/events/outboxService.js';
import { pushJobSpecs } from './push/jobs.js';
import { listenForShutdown } from './shutdownSignal.js';
import { startWebhookReceiver, type WebhookReceiver } from './webhooks/receiver.js';

/** A started daemon: its parts, for in-process callers (`demo`, tests), and its one way to stop. */
export interface RunningDaemon {
  readonly db: Db;
  readonly metrics: Metrics;
  readonly scheduler: Scheduler;
  /** The platform client; undefined until REVIEWS_API_URL and REVIEWS_API_KEY are set. */
  readonly api: PartnerApi | undefined;
  readonly webhooks: WebhookReceiver;
  /** Where health and metrics are served, e.g. `http://127.0.0.1:9464` (ADMIN_PORT 0 resolved). */
  readonly adminUrl: string;
  /**
   * Stops every part in the reverse order of starting, within the grace period plus a bound for
   * closing; idempotent. Resolves false when it had to abandon parts that did not close in time.
   */
  stop(reason: string): Promise<boolean>;
}

/** Beyond the grace period for jobs: how long closing the servers and the database may take. */
const CLOSE_BOUND_MS = 5_000;
/** After stopping, how long the event loop may take to drain before the process ends anyway. */
const EXIT_BOUND_MS = 1_000;

/** Start-up given up because shutdown began; `clean` as `stop` resolved. */
class StartupInterrupted extends Error {
  override readonly name = 'StartupInterrupted';
  constructor(
    readonly clean: boolean,
    options: ErrorOptions,
  ) {
    super('interrupted during start-up', options);
  }
}

/** How long start-up waits for the first read of the freshness gauges before it goes on without. */
const GAUGES_FIRST_READ_BOUND_MS = 5_000;

/** The longest wait between two tries at reaching the database at start-up. */
const UNREACHABLE_RETRY_MAX_MS = 30_000;

/**
 * Socket errors of a server not reached: refused, reset, unresolved (or the resolver away), no
 * route to its host or network (an interface, route or VPN not up yet as the container starts),
 * timed out.
 */
const UNREACHED_CODES = [
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ETIMEDOUT',
];

/**
 * A failure to reach the server at all (refused, unresolved, unrouted, cut while connecting,
 * starting up, no connection slot free): a database restarting as the daemon starts, or full
 * while a rolling deploy doubles the replicas, which start-up waits out. Anything else (a
 * password refused, a migration failing) ends it, as a mistake waiting cannot fix.
 */
function isUnreachable(error: unknown): boolean {
  const { code, name, message } = error as { code?: unknown; name?: unknown; message?: unknown };
  return (
    UNREACHED_CODES.includes(String(code)) ||
    // the database system is starting up, or shutting down; connection failures; too many
    // connections (max_connections, or the role's connection limit, reached)
    ['57P03', '57P01', '08001', '08006', '53300'].includes(String(code)) ||
    name === 'KnexTimeoutError' ||
    /^Connection terminated (unexpectedly|due to connection timeout)/.test(String(message)) ||
    // pg's connect timeout on the client knex opens (a server that accepts and never answers: a
    // PgBouncer whose server is down, a firewall that drops): a server not reached, like a refusal
    (name === 'Error' && message === 'timeout expired')
  );
}

/**
 * Starts every part of `review-mirror run`: health and metrics first, then migrations, scheduled
 * jobs. Each part that starts pushes its own closer; stopping runs them last-started-first, so
 * the scheduler stops (and in-flight runs finish within the grace period) before the database
 * closes, and the admin server closes last. Once `shutdown` aborts, start-up stops where it is
 * (StartupInterrupted) and nothing more starts.
 */
export async function startDaemon(ctx: Context, shutdown?: AbortSignal): Promise<RunningDaemon> {
  const { config, log } = ctx;
  const closers: Array<{ name: string; close: () => Promise<void> }> = [];
  let stopping: Promise<boolean> | undefined;
  const stop = (reason: string): Promise<boolean> => {
    stopping ??= (async () => {
      onStopping();
      const deadlineMs = config.shutdownGraceMs + CLOSE_BOUND_MS;
      log.info({ reason, graceMs: config.shutdownGraceMs, deadlineMs }, 'shutting down');
      const closeAll = async () => {
        for (const { name, close } of closers.reverse()) {
          await close().catch((error: unknown) =>
            log.error({ part: name, err: describeError(error) }, 'error while stopping'),
          );
        }
        return true;
      };
      // A part that hangs (a frozen database connection) must not keep the process alive.
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), deadlineMs);
      });
      const clean = await Promise.race([closeAll(), deadline]);
      clearTimeout(timer);
      if (clean) log.info('stopped');
      else log.error({ deadlineMs }, 'shutdown deadline passed; abandoning what is still open');
      return clean;
    })();
    return stopping;
  };

  const goOn = () => shutdown?.throwIfAborted();
  let onStopping = () => {};
  // A query start-up gave up on (a migration queued on another replica's lock, the secrets read
  // from a database that hangs) still holds its connection, and closing the pool waits for it:
  // not waited for, it ends with that wait or with the process (the server then rolls its
  // transaction back).
  let queryAbandoned = false;
  const abandonedIfShuttingDown = (error: unknown): never => {
    queryAbandoned ||= shutdown?.aborted === true;
    throw error;
  };
  try {
    // Listening before anything can wait: an orchestrator's liveness probe must find the process
    // alive while start-up waits for the database or another replica's migration, or it kills it
    // and the wait that should end a crash loop becomes one. Ready only once everything started.
    const metrics = makeMetrics();
    const admin = makeAdminServer({ metrics });
    const adminUrl = await admin.app.listen({ host: config.admin.host, port: config.admin.port });
    closers.push({ name: 'admin server', close: () => admin.close() });
    onStopping = () => admin.stopping();
    log.info({ url: adminUrl }, 'admin server listening');
    goOn();

    admin.starting('opening the database');
    const db = await openDb(dbOptionsFromConfig(config, log));
    closers.push({
      name: 'database',
      close: async () => {
        if (queryAbandoned) void db.close().catch(() => {});
        else await db.close();
      },
    });
    goOn();
    // Only a server's migration can wait on another process, or on the server itself: the
    // embedded one's data is ours alone.
    let applied: string[] | undefined;
    for (let attempt = 0; applied === undefined; attempt++) {
      // Until the database answers, a retry is still the wait for it.
      if (attempt === 0) admin.starting('applying migrations (or waiting for another replica applying them)');
      try {
        applied =
          db.backend === 'postgres'
            ? await untilAborted(migrate(db, { signal: shutdown }), shutdown).catch(abandonedIfShuttingDown)
            : await migrate(db);
      } catch (error) {
        if (shutdown?.aborted || !isUnreachable(error)) throw error;
        // A failing dependency never ends the process: it waits, saying so, until it can go on.
        const delayMs = Math.min(UNREACHABLE_RETRY_MAX_MS, 1_000 * 2 ** attempt);
        admin.starting('waiting for the database, which is unreachable');
        log.warn(
          { err: describeError(error), retryInMs: delayMs },
          'database unreachable; start-up waits for it',
        );
        await sleep(delayMs, undefined, { signal: shutdown });
      }
    }
    log.info({ applied, backend: db.backend, schema: db.schema }, 'database ready');
    goOn();

    // Every replica reports the mirror's freshness, not only the one whose job just ran.
    admin.starting('reading the freshness gauges');
    const gauges = new MirrorGauges({ db, log, metrics });
    await untilAborted(gauges.refreshWithin(GAUGES_FIRST_READ_BOUND_MS), shutdown).catch(
      abandonedIfShuttingDown,
    );
    gauges.start();
    closers.push({ name: 'freshness gauges', close: async () => gauges.stop() });
    goOn();

    admin.starting('starting the webhook receiver and the jobs');
    const readinessChecks: Array<() => Promise<string | undefined>> = [];

    const api =
      config.api.url && config.api.key ? makePartnerApi(partnerApiOptions(config, log, metrics)) : undefined;
    if (api) closers.push({ name: 'partner API client', close: () => api.close() });
    else if (config.api.url === undefined) log.warn('REVIEWS_API_URL not set; sync jobs disabled');
    else log.warn('REVIEWS_API_KEY not set; sync jobs disabled');

    const webhooks = await startWebhookReceiver({ ...ctx, db, metrics, api, shutdown }).catch(
      abandonedIfShuttingDown,
    );
    closers.push({ name: 'webhook receiver', close: () => webhooks.close() });
    readinessChecks.push(async () => webhooks.readinessProblem());
    goOn();

    // The one place where jobs are registered. Nothing runs before both servers listen, and the
    // scheduler is stopped first: no job starts once shutdown began.
    const scheduler = new Scheduler(runnerDeps(ctx, db, metrics));
    const pull = {
      db,
      log,
      metrics,
      overlapMs: config.sync.overlapMs,
      detailConcurrency: config.sync.detailConcurrency,
    };
    const push = api ? pushJobSpecs({ db, api, log, metrics, scrubber: ctx.scrubber }, config) : [];
    for (const spec of [
      ...(api ? pullJobSpecs({ ...pull, api }, config.sync) : []),
      ...webhooks.jobs,
      ...push,
    ]) {
      scheduler.add(spec);
    }
    // The outbox is drained by every replica (rows are claimed, not locked per job).
    const outbox = api
      ? new OutboxService({ db, api, log, metrics, scrubber: ctx.scrubber }, config.events)
      : undefined;
    closers.push({
      name: 'scheduler and events outbox',
      close: () => stopTogether(scheduler.stop(config.shutdownGraceMs), outbox?.stop()),
    });
    goOn();
    scheduler.start();

    if (api && outbox) {
      outbox.start();
      log.info({ worker: outbox.worker }, 'events outbox worker started');
      // Closed first (closers run in reverse): jobs in a back-off end now, not after the grace
      // period, and are recorded interrupted by the shutdown, not failed.
      closers.push({
        name: 'API retries',
        close: async () => {
          scheduler.shuttingDown();
          api.stopRetrying();
        },
      });
    }

    admin.running(db, readinessChecks);
    log.info('started');
    return { db, metrics, scheduler, api, webhooks, adminUrl, stop };
  } catch (error) {
    if (!shutdown?.aborted) {
      await stop('start-up failed');
      throw error;
    }
    throw new StartupInterrupted(await stop(describeError(shutdown.reason)), { cause: error });
  }
}

/**
 * Waits for parts stopping side by side: the scheduler stops scheduling as soon as it is told
 * (before anything is awaited), and its runs in flight get the grace period and then the abort
 * however long the outbox waits for its event request in flight, which is never cut (its
 * outcome would be unknown). Rejects with the first failure, once all are stopped.
 */
async function stopTogether(...stopping: Array<Promise<void> | undefined>): Promise<void> {
  const failed = (await Promise.allSettled(stopping)).find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/** `review-mirror run`: start, wait for a signal, go through the one shutdown path. */
export async function runDaemon(ctx: Context): Promise<void> {
  // Listening before start-up: a SIGTERM during migrations still goes through the one shutdown path.
  const shutdown = listenForShutdown();
  let failed = false;
  try {
    let clean: boolean;
    try {
      const daemon = await startDaemon(ctx, shutdown.signal);
      clean = await daemon.stop(await shutdown.received);
    } catch (error) {
      if (!(error instanceof StartupInterrupted)) {
        failed = true;
        throw error;
      }
      clean = error.clean;
    }
    // Exit 1 says work was abandoned (a part that never closed).
    process.exitCode = clean ? 0 : 1;
  } finally {
    shutdown.dispose();
    // Sockets of a frozen connection, or a query start-up or stopping gave up on, can keep the
    // event loop alive after any stop, a failed start-up's included: the process ends all the
    // same, soon. A failure's code is the caller's (cli.ts: 2 for the configuration, else 1), set
    // as the error reaches it, long before this fires: read then, not now, and never a success.
    setTimeout(() => process.exit(failed ? process.exitCode || 1 : process.exitCode), EXIT_BOUND_MS).unref();
  }
}
