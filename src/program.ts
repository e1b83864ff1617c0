import { Argument, Command } from 'commander';
import { demoCommand } from './commands/demo.js';
import { formatStatus, readStatus } from './commands/status.js';
import { runSync } from './commands/sync.js';
import { webhooksCommand } from './commands/webhooks.js';
import { type Context, makeContext, withDb } from './context.js';
import { runDaemon } from './daemon.js';
import { migrate } from './db/migrate.js';
import { SYNC_TARGETS, type SyncTarget } from './pull/jobs.js';
import { sandboxCommand } from './sandbox/command.js';

/** Wraps a command body: builds the context (config errors exit 2), runs, and reports failures in one line. */
function action<A extends unknown[]>(body: (ctx: Context, ...args: A) => Promise<void>) {
  return async (...args: A) => {
    const ctx = makeContext();
    await body(ctx, ...args);
  };
}

export function buildProgram(): Command {
  const program = new Command('review-mirror')
    .description('Keeps a Postgres mirror of your reviews on the review platform, and pushes CRM data back.')
    .showHelpAfterError()
    .exitOverride();

  program
    .command('migrate')
    .description('create or upgrade the database schema, then exit')
    .action(
      action(async (ctx) => {
        const applied = await withDb(ctx, migrate);
        process.stdout.write(
          applied.length === 0 ? 'schema is up to date\n' : `applied: ${applied.join(', ')}\n`,
        );
      }),
    );

  program
    .command('status')
    .description('show each sync job: watermark, last run, outcome, counts')
    .option('--json', 'print JSON instead of a table')
    .action(
      action(async (ctx, opts: { json?: boolean }) => {
        const report = await withDb(ctx, readStatus);
        process.stdout.write(
          opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${formatStatus(report)}\n`,
        );
      }),
    );

  program
    .command('sync')
    .description(
      'mirror once, then exit: reviews (--full: reconcile removals), locations, professionals, or all',
    )
    .addArgument(new Argument('<target>', 'what to mirror').choices(SYNC_TARGETS))
    .option(
      '--full',
      'reviews: walk the whole feed and mark removed reviews; professionals: re-read every record',
    )
    .action(
      action(async (ctx, target: SyncTarget, opts: { full?: boolean }) =>
        runSync(ctx, target, { full: opts.full === true }),
      ),
    );

  program
    .command('run')
    .description('run the daemon: migrations, scheduled sync, webhook receiver, health and metrics')
    .action(action(async (ctx) => runDaemon(ctx)));

  program.addCommand(sandboxCommand());
  program.addCommand(webhooksCommand());
  program.addCommand(demoCommand());

  return program;
}
