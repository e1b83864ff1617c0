import { requireApi } from '../config/schema.js';
import type { Context } from '../context.js';
import { withDb } from '../context.js';
import { migrate } from '../db/migrate.js';
import { makePartnerApi, partnerApiOptions } from '../partner-api/client.js';
import { pullJobs, type SyncTarget } from '../pull/jobs.js';
import { runJob } from '../pull/runJob.js';

/**
 * `review-mirror sync <target> [--full]`: runs the jobs once, in order, and returns. Applies
 * migrations first (a fresh database needs no separate step). A failure propagates, so the CLI
 * exits non-zero with its one-line reason; SIGINT/SIGTERM stop the walk after the page in hand,
 * its checkpoint committed.
 */
export async function runSync(
  ctx: Context,
  target: SyncTarget,
  options: { full: boolean },
  out: NodeJS.WritableStream = process.stdout,
): Promise<void> {
  requireApi(ctx.config); // a configuration error before any connection is opened
  const stop = new AbortController();
  const onSignal = () => stop.abort(new Error('interrupted by a signal'));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
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
        const run = await runJob(db, ctx.log, job.name, job.body, { wait: true, signal: stop.signal });
        const counts = Object.entries(run.counts)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ');
        out.write(`${job.name}: ${run.outcome}${counts === '' ? '' : ` ${counts}`}\n`);
      }
    });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await api.close();
  }
}
