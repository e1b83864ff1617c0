import { Command } from 'commander';
import { formatStatus, readStatus } from './commands/status.js';
import { type Context, makeContext, withDb } from './context.js';
import { runDaemon } from './daemon.js';
import { migrate } from './db/migrate.js';

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
    .command('run')
    .description('run the daemon: migrations, scheduled sync, webhook receiver, health and metrics')
    .action(action(async (ctx) => runDaemon(ctx)));

  return program;
}
