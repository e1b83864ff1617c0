import { Command, Option } from 'commander';
import { requireApi } from '../config/schema.js';
import { type Context, commandAction, withDb, withMirror } from '../context.js';
import { migrate } from '../db/migrate.js';
import { REPLICA_ID } from '../jobs/replicaIdentity.js';
import { makePartnerApi, partnerApiOptions } from '../partner-api/client.js';
import { DEFAULT_BACKOFF } from '../partner-api/retryPolicy.js';
import { enqueueEventsFile } from '../push/events/enqueueFile.js';
import { toNewEvent } from '../push/events/eventInput.js';
import { OutboxSender } from '../push/events/outboxSender.js';
import { enqueueEvents, listEvents, readOutboxStats, resolveEvent } from '../push/events/outboxSql.js';
import { ENCODINGS, type Encoding } from '../push/readRecords.js';
import { listenForShutdown } from '../shutdownSignal.js';
import { alignColumns } from '../status/alignColumns.js';
import { migrateUnlessAborted } from './migrateFirst.js';
import { wholeNumberOption } from './wholeNumberOption.js';

const STATES = ['pending', 'sending', 'sent', 'failed', 'parked'] as const;

/** `review-mirror events …`: lifecycle events through the outbox. */
export function eventsCommand(): Command {
  const command = new Command('events').description(
    'lifecycle events (matter.closed, …) through the outbox: each sent once',
  );
  command
    .command('send')
    .description('enqueue one event; `run` sends it (or `events flush`)')
    .requiredOption('--email <email>', 'the recipient')
    .requiredOption('--type <type>', 'the event type, e.g. matter.closed')
    .option('--key <key>', 'idempotency key (default: derived from email, type, professional and metadata)')
    .option('--professional <uuid>', 'the professional the event concerns')
    .option('--metadata <json>', 'a JSON object sent with the event')
    .action(
      commandAction(
        async (
          ctx,
          flags: { email: string; type: string; key?: string; professional?: string; metadata?: string },
        ) => {
          const event = toNewEvent(
            {
              key: flags.key,
              email: flags.email,
              event_type: flags.type,
              professional_id: flags.professional,
              metadata: flags.metadata,
            },
            'cli',
          );
          if ('field' in event) throw new Error(`events send: ${event.field} ${event.reason}`);
          const added = await withDb(ctx, async (db) => {
            await migrate(db);
            return enqueueEvents(db.knex, db, [event]);
          });
          process.stdout.write(
            added === 1
              ? `enqueued ${event.key}\n`
              : `already known: ${event.key} (enqueued or sent before; not sent again)\n`,
          );
        },
      ),
    );
  command
    .command('push')
    .description('enqueue the events of a CSV or JSON Lines file (column event_id is the key)')
    .argument('<file>', 'the events file')
    .addOption(new Option('--encoding <e>', 'the file encoding').choices(ENCODINGS).default('utf-8'))
    .action(
      commandAction(async (ctx, file: string, flags: { encoding: Encoding }) =>
        pushEventsFile(ctx, file, flags),
      ),
    );
  command
    .command('flush')
    .description('send every event that is due now, then exit (what `run` does continuously)')
    .action(commandAction(async (ctx) => flush(ctx)));
  command
    .command('list')
    .description('the latest events of the outbox')
    .addOption(new Option('--state <state>', 'only events in this state').choices(STATES))
    .option('--limit <n>', 'how many', wholeNumberOption(1), 50)
    .option('--json', 'as JSON')
    .action(
      commandAction(async (ctx, flags: { state?: string; limit: number; json?: boolean }) => {
        const rows = await withMirror(ctx, async (db) => {
          await migrate(db);
          return listEvents(db.knex, db, flags);
        });
        if (flags.json) {
          process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
          return;
        }
        const table = [
          ['key', 'state', 'type', 'recipient', 'attempts', 'enqueued', 'sent', 'error'],
          ...rows.map((r) => [
            r.idempotency_key,
            r.possible_duplicate ? `${r.state} (possible duplicate)` : r.state,
            r.event_type,
            r.email ?? `contact ${r.contact_id}`,
            String(r.attempts),
            r.enqueued_at,
            r.sent_at ?? '-',
            r.last_error ?? '',
          ]),
        ];
        process.stdout.write(`${alignColumns(table).join('\n')}\n`);
      }),
    );
  for (const action of ['retry', 'discard'] as const) {
    command
      .command(action)
      .description(
        action === 'retry'
          ? 'send a parked or failed event again (the platform may then have it twice)'
          : 'never send a parked or pending event (it is kept as failed)',
      )
      .argument('<key>', 'the idempotency key')
      .action(
        commandAction(async (ctx, key: string) => {
          const state = await withMirror(ctx, async (db) => {
            await migrate(db);
            return resolveEvent(db.knex, db, key, action);
          });
          if (state === undefined) throw new Error(`events ${action}: no event has the key ${key}`);
          const done = action === 'retry' ? state === 'pending' : state === 'failed';
          if (!done) throw new Error(`events ${action}: ${key} is ${state}; nothing to do`);
          process.stdout.write(`${key}: ${state}\n`);
        }),
      );
  }
  return command;
}

async function pushEventsFile(ctx: Context, file: string, flags: { encoding: Encoding }): Promise<void> {
  const s = await withDb(ctx, async (db) => {
    await migrate(db);
    return enqueueEventsFile(db, file, flags);
  });
  process.stdout.write(
    `events: read=${s.read} enqueued=${s.enqueued} already_known=${s.known} rejected=${s.rejected}\nreport: ${s.reportPath}\n`,
  );
}

async function flush(ctx: Context): Promise<void> {
  requireApi(ctx.config);
  const shutdown = listenForShutdown();
  const api = makePartnerApi(partnerApiOptions(ctx.config, ctx.log));
  const { events } = ctx.config;
  try {
    const { counts, stats } = await withDb(ctx, async (db) => {
      await migrateUnlessAborted(db, shutdown.signal);
      const sender = new OutboxSender(
        { db, api, log: ctx.log, scrubber: ctx.scrubber },
        {
          worker: REPLICA_ID,
          concurrency: events.concurrency,
          ratePerSecond: events.ratePerSecond,
          leaseMs: events.leaseMs,
          policy: {
            unknownOutcome: events.unknownOutcome,
            maxAttempts: events.maxAttempts,
            ...DEFAULT_BACKOFF,
          },
        },
      );
      let counts: Awaited<ReturnType<OutboxSender['drain']>>;
      try {
        counts = await sender.drain(shutdown.signal);
      } finally {
        // A drain ended by a database outage may keep answers it could not write: a last try,
        // then each one left is logged as lost.
        await sender.close();
      }
      return { counts, stats: await readOutboxStats(db.knex, db) };
    });
    process.stdout.write(
      `events: sent=${counts.sent} retried=${counts.retried} failed=${counts.failed} parked=${counts.parked} possible_duplicates=${counts.possibleDuplicates} backlog=${stats.backlog}\n`,
    );
    // A drain stopped by a signal leaves what was due unsent: not the success of one that ended.
    if (shutdown.signal.aborted) throw shutdown.signal.reason;
    if (counts.failed + counts.parked > 0) process.exitCode = 1;
  } finally {
    shutdown.dispose();
    await api.close();
  }
}
