import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline/promises';
import { Command, Option } from 'commander';
import { type Context, commandAction, withDb, withMirror } from '../context.js';
import type { Db } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import type { Queryable } from '../db/queryable.js';
import { JOB } from '../jobs/jobNames.js';
import { CLI_LEASE_WAIT_MS, JobLease } from '../jobs/lease.js';
import { REPLICA_ID } from '../jobs/replicaIdentity.js';
import { checkpointToJson, parseStateJson } from '../pull/syncStateJson.js';
import { deleteCheckpoint, readCheckpoint, writeCheckpoint } from '../pull/syncStateSql.js';
import { listenForShutdown } from '../shutdownSignal.js';
import { migrateUnlessAborted } from './migrateFirst.js';

/** The jobs that keep a watermark and a resumable walk in `sync_state`. */
const STATEFUL_JOBS = [JOB.reviews, JOB.reconcile] as const;

const jobOption = () =>
  new Option('--job <name>', 'the job whose state it is').choices(STATEFUL_JOBS).makeOptionMandatory();

const json = (value: unknown) => JSON.stringify(value, null, 2);

/** `review-mirror state get|set|reset --job NAME`: a job's watermark and checkpoint, deliberately. */
export function stateCommand(): Command {
  const command = new Command('state').description(
    "inspect, set or reset a sync job's watermark and unfinished walk (JSON that round-trips)",
  );

  command
    .command('get')
    .description("print the job's state as JSON (what `state set` takes back)")
    .addOption(jobOption())
    .action(
      commandAction(async (ctx, opts: { job: string }) => {
        const state = await withMirror(ctx, async (db) => {
          await migrate(db);
          return readCheckpoint(db.knex, db, opts.job);
        });
        process.stdout.write(`${json(checkpointToJson(opts.job, state))}\n`);
      }),
    );

  command
    .command('set')
    .description("replace the job's state with JSON from FILE (or stdin); waits for a run in progress")
    .addOption(jobOption())
    .argument('[file]', 'the state as JSON, as `state get` prints it; - or none: stdin')
    .action(
      commandAction(async (ctx, file: string | undefined, opts: { job: string }) => {
        const text = file === undefined || file === '-' ? await readStdin() : await readFile(file, 'utf8');
        const next = parseStateJson(opts.job, text);
        const before = await underLease(ctx, opts.job, async (db, trx) => {
          const previous = await readCheckpoint(trx, db, opts.job);
          await writeCheckpoint(trx, db, opts.job, next);
          return previous;
        });
        process.stdout.write(
          `state of ${opts.job} set\nwas: ${json(checkpointToJson(opts.job, before))}\nnow: ${json(checkpointToJson(opts.job, next))}\n`,
        );
      }),
    );

  command
    .command('reset')
    .description('forget the watermark and walk: the next run reads the whole feed again')
    .addOption(jobOption())
    .option('--yes', 'do not ask for confirmation (required when stdin is not a terminal)')
    .action(
      commandAction(async (ctx, opts: { job: string; yes?: boolean }) => {
        if (opts.yes !== true)
          await confirm(`reset the state of ${opts.job}? Its next run reads the whole feed.`);
        const before = await underLease(ctx, opts.job, async (db, trx) => {
          const previous = await readCheckpoint(trx, db, opts.job);
          await deleteCheckpoint(trx, db, opts.job);
          return previous;
        });
        process.stdout.write(
          `state of ${opts.job} reset; its next run starts from the beginning\nwas: ${json(checkpointToJson(opts.job, before))}\n`,
        );
      }),
    );
  return command;
}

/**
 * Runs `fn` in a transaction while holding the job's lease, fenced like a run's own writes: a walk
 * in progress (here or in a daemon) ends first, and cannot write its checkpoint over this one.
 */
async function underLease<T>(
  ctx: Context,
  job: string,
  fn: (db: Db, trx: Queryable) => Promise<T>,
): Promise<T> {
  const stop = listenForShutdown();
  try {
    return await withDb(ctx, async (db) => {
      await migrateUnlessAborted(db, stop.signal);
      const settings = { holder: REPLICA_ID, seconds: ctx.config.jobs.leaseSeconds };
      const lease = await JobLease.acquire(db, job, settings, ctx.log, {
        signal: stop.signal,
        maxWaitMs: CLI_LEASE_WAIT_MS,
      });
      try {
        return await db.knex.transaction(async (trx) => {
          const result = await fn(db, trx);
          await lease.fence(trx);
          return result;
        });
      } finally {
        await lease.release();
      }
    });
  } finally {
    stop.dispose();
  }
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) throw new Error('state set: give the state as a FILE, or pipe it in');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Asks on the terminal; without one, only --yes may confirm. */
async function confirm(question: string): Promise<void> {
  if (!process.stdin.isTTY) {
    throw new Error('state reset: stdin is not a terminal to confirm on; pass --yes to reset');
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  // Ctrl-C or Ctrl-D at the prompt closes it. Before Node 20.19.5 (nodejs/node#54030) that left
  // the question unsettled, and the command ended on an unsettled await (exit 13, a warning)
  // instead of saying nothing changed: the answer is given up on here, whatever the version. A
  // SIGINT listener makes readline report Ctrl-C instead of closing.
  const interrupted = new AbortController();
  const giveUp = () => interrupted.abort();
  rl.on('SIGINT', giveUp);
  rl.on('close', giveUp);
  try {
    const answer = await rl
      .question(`${question} [y/N] `, { signal: interrupted.signal })
      .catch((error: unknown) => {
        if (interrupted.signal.aborted)
          throw new Error('state reset: interrupted at the confirmation; nothing changed');
        throw error;
      });
    if (!/^y(es)?$/i.test(answer.trim())) throw new Error('state reset: not confirmed; nothing changed');
  } finally {
    rl.off('close', giveUp);
    rl.close();
  }
}
