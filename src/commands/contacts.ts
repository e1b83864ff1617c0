import { Command, InvalidArgumentError, Option } from 'commander';
import { loadConfigFile } from '../config/configFile.js';
import { delimiterOf, requireApi } from '../config/schema.js';
import { type Context, commandAction, runnerDeps, withDb } from '../context.js';
import { JOB } from '../jobs/jobNames.js';
import { NO_FENCE } from '../jobs/lease.js';
import { type JobRunInfo, runJob } from '../jobs/runner.js';
import { makePartnerApi, partnerApiOptions } from '../partner-api/client.js';
import { type PushSummary, pushContacts } from '../push/contacts/pushContacts.js';
import { ENCODINGS, type Encoding, type FileFormat } from '../push/readRecords.js';
import { listenForShutdown } from '../shutdownSignal.js';
import { migrateUnlessAborted } from './migrateFirst.js';
import { terminalPushProgress } from './pushProgressBar.js';

interface PushFlags {
  dryRun?: boolean;
  full?: boolean;
  mapping?: string;
  delimiter?: string;
  encoding: Encoding;
  format?: FileFormat;
}

const delimiterArg = (value: string): string => {
  const d = delimiterOf(value);
  if (d === undefined) throw new InvalidArgumentError('must be , ; | or tab');
  return d;
};

/** `review-mirror contacts push FILE`: the CRM export to the platform's contacts. */
export function contactsCommand(): Command {
  const command = new Command('contacts').description('push contacts from a CRM export to the platform');
  command
    .command('push')
    .description('send the new, changed and previously failed contacts of a CSV or JSON Lines export')
    .argument('<file>', 'the export: .csv (or .tsv, .txt) or .jsonl')
    .option('--dry-run', 'read, validate and compare only: send nothing, record nothing but the report')
    .option('--full', 're-send every valid contact, changed or not (a deliberate resync)')
    .option('--mapping <file>', 'the mapping file (YAML or JSON); default REVIEW_MIRROR_CONFIG')
    .option(
      '--delimiter <d>',
      'CSV delimiter (, ; | or tab); default: detected from the header',
      delimiterArg,
    )
    .addOption(new Option('--encoding <e>', 'the file encoding').choices(ENCODINGS).default('utf-8'))
    .addOption(new Option('--format <f>', 'default: from the file name').choices(['csv', 'jsonl']))
    .action(commandAction(async (ctx, file: string, flags: PushFlags) => runPush(ctx, file, flags)));
  return command;
}

async function runPush(ctx: Context, file: string, flags: PushFlags): Promise<void> {
  // Configuration errors before any connection is opened.
  const { contacts, events } = loadConfigFile(flags.mapping ?? ctx.config.configFile);
  requireApi(ctx.config);
  const shutdown = listenForShutdown();
  const api = makePartnerApi(partnerApiOptions(ctx.config, ctx.log));
  let summary: PushSummary | undefined;
  const progress = terminalPushProgress();
  try {
    await withDb(ctx, async (db) => {
      await migrateUnlessAborted(db, shutdown.signal);
      const options = {
        mapping: contacts,
        rules: events.rules,
        full: flags.full === true,
        dryRun: flags.dryRun === true,
        delimiter: flags.delimiter,
        encoding: flags.encoding,
        format: flags.format,
        concurrency: ctx.config.contacts.concurrency,
        ratePerSecond: ctx.config.contacts.ratePerSecond,
        logRetentionDays: ctx.config.contacts.logRetentionDays,
      };
      const deps = { db, api, log: ctx.log, scrubber: ctx.scrubber };
      const push = async (counts: Record<string, number>, signal?: AbortSignal, run?: JobRunInfo) => {
        summary = await pushContacts(
          deps,
          file,
          options,
          counts,
          run ?? { runId: undefined, fence: NO_FENCE },
          signal,
          progress,
        );
      };
      // A dry run records no run; a real one is exclusive: two pushes never interleave, and
      // neither does one with the inbox's of `run`.
      if (options.dryRun) await push({}, shutdown.signal);
      else
        await runJob(
          runnerDeps(ctx, db),
          { name: JOB.contactsPush, lease: JOB.contactsInbox, run: push },
          { wait: true, signal: shutdown.signal },
        );
    });
  } finally {
    progress?.stop();
    shutdown.dispose();
    await api.close();
  }
  const s = summary!;
  const verb = flags.dryRun ? 'to send' : 'sent';
  process.stdout.write(
    `contacts: read=${s.read} valid=${s.valid} rejected=${s.rejected} replaced=${s.replaced} unchanged=${s.unchanged} ${verb}=${flags.dryRun ? s.toSend : s.sent} failed=${s.failed}${s.givenUp > 0 ? ` given_up=${s.givenUp}` : ''}${s.stillGivenUp > 0 ? ` still_given_up=${s.stillGivenUp}` : ''}${events.rules.length > 0 ? ` events=${s.events}` : ''}\n` +
      `report: ${s.reportPath}\n`,
  );
  // Every valid row on the platform is success; anything short of it is not.
  if (s.failed > 0) process.exitCode = 1;
}
