import { Argument, Command } from 'commander';
import { demoCommand } from './commands/demo.js';
import { formatStatus, readStatus } from './commands/status.js';
import { runSync } from './commands/sync.js';
import { webhooksCommand } from './commands/webhooks.js';
import { commandAction, makeContext, withDb } from './context.js';
import { runDaemon } from './daemon.js';
import { migrate } from './db/migrate.js';
import { SYNC_TARGETS, type SyncTarget } from './pull/jobs.js';
import { sandboxCommand } from './sandbox/command.js';

export function buildProgram(): Command {
  const program = new Command('review-mirror')
    .description('Keeps a Postgres mirror of your reviews on the review platform.')
    .showHelpAfterError()
    .exitOverride();

  program
    .command('migrate')
    .description('create or upgrade the database schema, then exit')
    .action(
      commandAction(async (ctx) => {
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
      commandAction(async (ctx, opts: { json?: boolean }) => {
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
      commandAction(async (ctx, target: SyncTarget, opts: { full?: boolean }) =>
        runSync(ctx, target, { full: opts.full === true }),
      ),
    );

  program
    .command('run')
    .description('run the daemon: migrations, scheduled sync, webhook receiver, health and metrics')
    .action(async () => runDaemon(makeContext()));

  program.addCommand(sandboxCommand());
  program.addCommand(webhooksCommand());
  program.addCommand(demoCommand());

  return program;
}
