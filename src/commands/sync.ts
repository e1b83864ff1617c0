import { Argument, Command } from 'commander';
import { requireApi } from '../config/schema.js';
import { type Context, commandAction, runnerDeps, withDb } from '../context.js';
import { runJob } from '../jobs/runner.js';
import { makePartnerApi, partnerApiOptions } from '../partner-api/client.js';
import type { BackfillRange } from '../pull/backfillReviews.js';
import { pullJobs, SYNC_TARGETS, type SyncTarget } from '../pull/jobs.js';
import { listenForShutdown } from '../shutdownSignal.js';
import { migrateUnlessAborted } from './migrateFirst.js';
import { timeOption } from './timeOption.js';

/** `review-mirror sync <target> [--full]`. */
export function syncCommand(): Command {
  return new Command('sync')
    .description(
      'mirror once, then exit: reviews (--full: reconcile removals), locations, professionals, or all',
    )
    .addArgument(new Argument('<target>', 'what to mirror').choices(SYNC_TARGETS))
    .option(
      '--full',
      'reviews: walk the whole feed and mark removed reviews; professionals: re-read every record',
    )
    .option(
      '--since <time>',
      'reviews: backfill those created after this ISO 8601 time; the watermark and checkpoint stay',
      timeOption,
    )
    .option(
      '--until <time>',
      'reviews: with or without --since, backfill those created up to this time',
      timeOption,
    )
    .action(
      commandAction(async (ctx, target: SyncTarget, opts: { full?: boolean; since?: Date; until?: Date }) => {
        const backfill = opts.since !== undefined || opts.until !== undefined;
        if (backfill && target !== 'reviews')
          throw new Error('sync: --since and --until apply to `sync reviews` only');
        if (backfill && opts.full)
          throw new Error('sync: --full reads the whole feed: it takes no --since or --until');
        if (opts.since && opts.until && opts.until <= opts.since) {
          throw new Error('sync: --until must be later than --since');
        }
        await runSync(ctx, target, {
          full: opts.full === true,
          range: backfill ? { since: opts.since, until: opts.until } : undefined,
        });
      }),
    );
}

/**
 * `review-mirror sync <target> [--full]`: runs the jobs once, in order, and returns. Applies
 * migrations first (a fresh database needs no separate step; a signal ends a wait for another
 * process's migration, before any job starts). A failure propagates, so the CLI
 * exits non-zero with its one-line reason; SIGINT/SIGTERM stop the walk after the page in hand,
 * its checkpoint committed.
 */
async function runSync(
  ctx: Context,
  target: SyncTarget,
  options: { full: boolean; range: BackfillRange | undefined },
  out: NodeJS.WritableStream = process.stdout,
): Promise<void> {
  requireApi(ctx.config); // a configuration error before any connection is opened
  const stop = listenForShutdown();
  const api = makePartnerApi(partnerApiOptions(ctx.config, ctx.log));
  try {
    await withDb(ctx, async (db) => {
      await migrateUnlessAborted(db, stop.signal);
      const pull = {
        db,
        api,
        log: ctx.log,
        overlapMs: ctx.config.sync.overlapMs,
        detailConcurrency: ctx.config.sync.detailConcurrency,
      };
      for (const job of pullJobs(pull, target, options.full, options.range)) {
        const run = await runJob(runnerDeps(ctx, db), job, {
          wait: true,
          signal: stop.signal,
        });
        const counts = Object.entries(run.counts)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ');
        out.write(`${job.name}: ${run.outcome}${counts === '' ? '' : ` ${counts}`}\n`);
      }
    });
  } finally {
    stop.dispose();
    await api.close();
  }
}
