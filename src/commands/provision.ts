import { readFile } from 'node:fs/promises';
import { Command } from 'commander';
import { requireApi } from '../config/schema.js';
import { commandAction, runnerDeps, withDb } from '../context.js';
import { describeError } from '../errors.js';
import { JOB } from '../jobs/jobNames.js';
import { runJob } from '../jobs/runner.js';
import { makePartnerApi, partnerApiOptions } from '../partner-api/client.js';
import { type ProvisionResult, plannedResults, provision } from '../push/provision/provision.js';
import { parseProvisionFile } from '../push/provision/provisionFile.js';
import { formatProvisionReport, writeProvisionReport } from '../push/provision/provisionReport.js';
import { listenForShutdown } from '../shutdownSignal.js';
import { strictUtf8 } from '../strictUtf8.js';
import { migrateUnlessAborted } from './migrateFirst.js';

/** Requests in flight at once: a file holds tens of records, not thousands. */
const CONCURRENCY = 4;

/** `review-mirror provision FILE [--dry-run] [--no-wait] [--report FILE]`. */
export function provisionCommand(): Command {
  return new Command('provision')
    .description(
      'create the locations and professionals of a YAML or JSON file on the platform, each once, and print their survey URLs',
    )
    .argument(
      '<file>',
      '{locations: [...], professionals: [...]} with the API field names (see docs/push.md)',
    )
    .option('--dry-run', 'print what would be created and check the locations referenced; send no POST')
    .option('--no-wait', "do not wait for new records' survey URLs")
    .option('--report <file>', 'also write the report: JSON if FILE ends in .json, CSV otherwise')
    .action(
      commandAction(async (ctx, file: string, opts: { dryRun?: boolean; wait: boolean; report?: string }) => {
        requireApi(ctx.config);
        // A file that cannot be read or is not shaped right stops here, before any request.
        const plan = parseProvisionFile(utf8Text(await readFile(file)));
        const apiOptions = partnerApiOptions(ctx.config, ctx.log);
        const api = makePartnerApi(apiOptions);
        const shutdown = listenForShutdown();
        // Filled in as the run goes: a run cut short still reports what it did, and what it did not.
        const results = plannedResults(plan);
        let stopped: unknown;
        try {
          await withDb(ctx, async (db) => {
            await migrateUnlessAborted(db, shutdown.signal);
            const options = {
              dryRun: opts.dryRun === true,
              waitMs: opts.wait ? ctx.config.provision.waitMs : 0,
              concurrency: CONCURRENCY,
              retry: apiOptions.retry,
            };
            const run = async (counts: Record<string, number>, signal?: AbortSignal) => {
              await provision({ db, api, log: ctx.log }, plan, options, counts, signal, results);
            };
            // Two provisioning runs never interleave: each record's read-then-create is one at a time.
            if (options.dryRun) await run({}, shutdown.signal);
            else
              await runJob(
                runnerDeps(ctx, db),
                { name: JOB.provision, run },
                { wait: true, signal: shutdown.signal },
              );
          });
        } catch (error) {
          stopped = error;
        } finally {
          shutdown.dispose();
          await api.close();
        }
        // Errors are the platform's texts: scrubbed again before they are printed or written.
        const report = results.map((r) => ({
          ...r,
          error: r.error === null ? null : ctx.scrubber.scrub(r.error),
        }));
        process.stdout.write(`${formatProvisionReport(report).join('\n')}\n`);
        if (opts.report !== undefined) await writeProvisionReport(opts.report, report);
        if (stopped !== undefined) {
          throw new Error(`${stoppedSummary(results)}: ${describeError(stopped)}`, { cause: stopped });
        }
        if (results.some((r) => r.outcome === 'failed')) process.exitCode = 1;
      }),
    );
}

/**
 * The file as UTF-8 text. Read leniently, a file saved in a Windows code page or in UTF-16 would
 * create its names on the platform, on public pages and in invites, with U+FFFD in place of
 * every accented letter.
 */
function utf8Text(bytes: Buffer): string {
  const text = strictUtf8(bytes);
  if (text !== undefined) return text;
  const lenient = bytes.toString('utf8');
  const line = lenient.slice(0, lenient.indexOf('\ufffd')).split('\n').length;
  throw new Error(`the file is not UTF-8 text (line ${line}): save it as UTF-8`);
}

/**
 * The last line of a run cut short: how far it got, and the cause (the signal, the platform's or
 * the database's error), which the CLI prints scrubbed.
 */
function stoppedSummary(results: readonly ProvisionResult[]): string {
  const count = (outcome: ProvisionResult['outcome']) => results.filter((r) => r.outcome === outcome).length;
  return `provisioning stopped: ${results.length - count('not-attempted') - count('interrupted')} of ${results.length} records done, ${count('interrupted')} interrupted (run again: found by their slugs), ${count('not-attempted')} not attempted`;
}
