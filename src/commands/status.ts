import { Command } from 'commander';
import { commandAction, withDb } from '../context.js';
import { formatStatus, readStatus } from '../status/report.js';

/** `review-mirror status [--json]`: read from the database alone, no API call. */
export function statusCommand(): Command {
  return new Command('status')
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
}
