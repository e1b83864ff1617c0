import { Argument, Command } from 'commander';
import { requireApi } from '../config/schema.js';
import { type Context, commandAction, withDb } from '../context.js';
import { migrate } from '../db/migrate.js';
import { runJob } from '../jobs/runner.js';
import { makePartnerApi, partnerApiOptions } from '../partner-api/client.js';
import { pullJobs, SYNC_TARGETS, type SyncTarget } from '../pull/jobs.js';
import { listenForShutdown } from '../shutdownSignal.js';

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
    .action(
      commandAction(async (ctx, target: SyncTarget, opts: { full?: boolean }) =>
        runSync(ctx, target, { full: opts.full === true }),
      ),
    );
}

/**
 * `review-mirror sync <target> [--full]`: runs the jobs once, in order, and returns. Applies
 * migrations first (a fresh database needs no separate step). A failure propagates, so the CLI
 * exits non-zero with its one-line reason; SIGINT/SIGTERM stop the walk after the page in hand,
 * its checkpoint committed.
 */
async function runSync(
  ctx: Context,
  target: SyncTarget,
  options: { full: boolean },
  out: NodeJS.WritableStream = process.stdout,
): Promise<void> {
  requireApi(ctx.config); // a configuration error before any connection is opened
  const stop = listenForShutdown();
  const api = makePartnerApi(partnerApiOptions(ctx.config, ctx.log));
  try {
    await withDb(ctx, async (db) => {
      await migrate(db);
      const pull = {
        db,
        api,
        log: ctx.log,
        overlapMs: ctx.config.sync.overlapMs,
        detailConcurrency: ctx.config.sync.detailConcurrency,
      };
      for (const job of pullJobs(pull, target, options.full)) {
        const run = await runJob(
          { db, log: ctx.log, scrubber: ctx.scrubber, lease: { seconds: ctx.config.jobs.leaseSeconds } },
          job,
          {
            wait: true,
            signal: stop.signal,
          },
        );
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
