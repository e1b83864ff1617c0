import { Command } from 'commander';
import { commandAction, withMirror } from '../context.js';
import { formatStatus, readStatus } from '../status/report.js';

/** `review-mirror status [--json]`: read from the database alone, no API call. */
export function statusCommand(): Command {
  return new Command('status')
    .description('show each sync job: watermark, last run, outcome, counts')
    .option('--json', 'print JSON instead of a table')
    .action(
      commandAction(async (ctx, opts: { json?: boolean }) => {
        const report = await withMirror(ctx, readStatus);
        // Stored texts (a run's error, a webhook's last_error) came from outside: scrubbed again.
        const text = opts.json ? JSON.stringify(report, null, 2) : formatStatus(report);
        process.stdout.write(`${ctx.scrubber.scrub(text)}\n`);
      }),
    );
}
