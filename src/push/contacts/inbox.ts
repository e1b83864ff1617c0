import type { Stats } from 'node:fs';
import { mkdir, open, readdir, rename, stat } from 'node:fs/promises';
import { extname, join, sep } from 'node:path';
import type { ContactMapping, EventRule } from '../../config/configFile.js';
import { isDataError } from '../../db/dataError.js';
import { describeError, FatalError, RetryableError } from '../../errors.js';
import { JOB } from '../../jobs/jobNames.js';
import { NO_FENCE } from '../../jobs/lease.js';
import { addCount, type RunCounts } from '../../jobs/runCounts.js';
import type { JobRunInfo } from '../../jobs/runner.js';
import type { JobSpec } from '../../jobs/scheduler.js';
import { enqueueEventsFile } from '../events/enqueueFile.js';
import { formatOf, RecordFileError } from '../readRecords.js';
import { type PushContactsDeps, type PushContactsOptions, pushContacts } from './pushContacts.js';

const EXPORT_FILE = /\.(csv|tsv|txt|jsonl|ndjson)$/i;
/** Our own report beside an export (`FILE.rejects.csv`): one left by a killed push is not an export. */
const REPORT_FILE = /\.rejects\.csv$/i;
/** Events files (`events*.csv`, `events*.jsonl`, …) go to the outbox; every other export is contacts. */
const EVENTS_FILE = /^events/i;

export interface InboxOptions {
  readonly dir: string;
  readonly schedule: string;
  readonly settleMs: number;
  readonly mapping: ContactMapping;
  readonly rules: readonly EventRule[];
  /** How files are read (CRM_INBOX_ENCODING, CRM_INBOX_DELIMITER) and contacts sent. */
  readonly push: Omit<PushContactsOptions, 'mapping' | 'full' | 'dryRun'>;
}

/**
 * Where a file is while it is pushed. Taken there by a rename before it is read, so the file read
 * is the file moved afterwards: an export the CRM replaces meanwhile (write, then rename over the
 * old name) arrives in the inbox as a new file, for the next poll.
 */
const PROCESSING = 'processing';

/** A file of the inbox that fails by itself, before it is read: empty, or unreadable. */
class InboxFileError extends FatalError {
  override readonly name = 'InboxFileError';
}

/**
 * Errors JavaScript raises on a value it cannot take (a RangeError from a record): this file would
 * fail the same way every time. The database, the platform and the network fail with their own.
 * Not TypeError: the records are strings, so one is a bug of the program or its driver (a method
 * of undefined), which would park every export it met in failed/ instead of failing the run.
 */
const VALUE_ERRORS = [RangeError, SyntaxError, URIError];

/**
 * The CRM inbox of `run`: exports dropped into a directory are pushed once, then moved with their
 * report to `processed/` (every valid row on the platform) or `failed/`. The directory is polled,
 * since fs.watch misses events on Docker volumes and network mounts. A file is taken only once
 * its size, time and inode have stayed the same for the settle time: one still being written is
 * left for a later poll. The job is exclusive, so on a shared volume one replica takes each file;
 * a file it leaves in `processing/` (killed, its lease lost, the platform down) is pushed again by
 * the next run, here or on another replica, before any file of the inbox.
 */
export function contactsInboxJob(deps: PushContactsDeps, options: InboxOptions): JobSpec {
  const seen = new Map<string, { size: number; mtimeMs: number; ino: number; since: number }>();
  const processing = join(options.dir, PROCESSING);

  /** Whether `key`'s file has kept its size, time and inode for the settle time, as this replica saw it. */
  const settled = (key: string, stats: Stats): boolean => {
    // Read per file: the pushes before it in this run may have taken minutes.
    const now = Date.now();
    const before = seen.get(key);
    if (
      before === undefined ||
      before.size !== stats.size ||
      before.mtimeMs !== stats.mtimeMs ||
      before.ino !== stats.ino
    ) {
      seen.set(key, { size: stats.size, mtimeMs: stats.mtimeMs, ino: stats.ino, since: now });
      return false;
    }
    if (now - before.since < options.settleMs) return false;
    seen.delete(key);
    return true;
  };

  /**
   * Forgets the files of one directory (`ofDir` tells its keys) that are no longer listed: deleted
   * or moved away before they settled, they would otherwise be remembered for the life of the
   * process.
   */
  const forgetGone = (listed: readonly string[], ofDir: (key: string) => boolean): void => {
    const present = new Set(listed);
    for (const key of seen.keys()) if (ofDir(key) && !present.has(key)) seen.delete(key);
  };

  /**
   * Moves a settled file of the inbox into processing/; false when it is not taken this time. A
   * name that is not valid UTF-8 (Latin-1 from an SMB or FTP drop) is given its windows-1252
   * reading there, as everything after reads paths as text.
   */
  const take = async (entry: ExportEntry): Promise<boolean> => {
    const from = pathIn(options.dir, entry);
    const stats = await statIfThere(from);
    if (stats === undefined || !settled(entry.key, stats)) return false;
    const to = join(processing, entry.name);
    // One of its name still there (pushed again after a failure not its own) goes first.
    if ((await statIfThere(to)) !== undefined) return false;
    if (!isNamed(entry)) {
      deps.log.warn(
        { file: entry.name, bytes: entry.raw.toString('hex') },
        'CRM export name is not valid UTF-8: read as windows-1252 and renamed so',
      );
    }
    await rename(from, to);
    // Replaced between the look and the rename: it settles in processing/ first.
    const moved = await stat(to);
    if (moved.ino !== stats.ino || moved.size !== stats.size || moved.mtimeMs !== stats.mtimeMs) {
      settled(`${PROCESSING}/${entry.name}`, moved);
      return false;
    }
    return true;
  };

  return {
    name: JOB.contactsInbox,
    schedule: options.schedule,
    runAtStart: options.schedule !== 'off',
    run: async (counts, signal, run) => {
      for (const sub of ['processed', 'failed', PROCESSING]) {
        await mkdir(join(options.dir, sub), { recursive: true });
      }
      const pushTaken = (name: string) =>
        pushFile(deps, options, name, { counts, signal, run: run ?? { runId: undefined, fence: NO_FENCE } });
      // Left by a run before this one: first, so no export is pushed after a newer one of its name.
      const left = await listExports(processing);
      forgetGone(
        left.map((entry) => `${PROCESSING}/${entry.name}`),
        (key) => key.startsWith(`${PROCESSING}/`),
      );
      for (const entry of left) {
        signal?.throwIfAborted();
        if (!isNamed(entry)) {
          // Put there by hand under a name not valid UTF-8: given its reading, as when taken.
          if ((await statIfThere(join(processing, entry.name))) !== undefined) continue;
          await rename(pathIn(processing, entry), join(processing, entry.name));
        }
        const key = `${PROCESSING}/${entry.name}`;
        // Removed by hand since the listing: nothing to push.
        const stats = await statIfThere(join(processing, entry.name));
        if (stats === undefined) {
          seen.delete(key);
          continue;
        }
        if (seen.has(key) && !settled(key, stats)) continue;
        await pushTaken(entry.name);
      }
      const dropped = await listExports(options.dir);
      forgetGone(
        dropped.map((entry) => entry.key),
        (key) => !key.startsWith(`${PROCESSING}/`),
      );
      for (const entry of dropped) {
        signal?.throwIfAborted();
        if (await take(entry)) await pushTaken(entry.name);
      }
    },
  };
}

/** A file of a listing: its name as bytes, the name it is pushed under, and its key for settling. */
interface ExportEntry {
  readonly raw: Buffer;
  readonly name: string;
  readonly key: string;
}

const WINDOWS_1252 = new TextDecoder('windows-1252');

/** Whether the entry's name is its bytes, as UTF-8. */
const isNamed = (entry: ExportEntry) => entry.raw.equals(Buffer.from(entry.name));

/** The path of an entry of `dir`, as bytes: its name need not be valid UTF-8. */
const pathIn = (dir: string, entry: ExportEntry) => Buffer.concat([Buffer.from(`${dir}${sep}`), entry.raw]);

/**
 * The exports of a directory, by name. Listed as bytes: a name that is not valid UTF-8 would be
 * listed with U+FFFD in it, a path that does not exist, and be skipped for ever.
 */
async function listExports(dir: string): Promise<ExportEntry[]> {
  const entries = await readdir(dir, { withFileTypes: true, encoding: 'buffer' });
  return entries
    .filter((e) => e.isFile())
    .map((e) => {
      const raw = e.name;
      const utf8 = raw.toString('utf8');
      const name = Buffer.from(utf8).equals(raw) ? utf8 : WINDOWS_1252.decode(raw);
      return { raw, name, key: raw.toString('hex') };
    })
    .filter(({ name }) => !name.startsWith('.') && EXPORT_FILE.test(name) && !REPORT_FILE.test(name))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The file's stats, or undefined when it is gone (moved or deleted by someone else). */
function statIfThere(path: string | Buffer): Promise<Stats | undefined> {
  return stat(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
}

interface RunOf {
  readonly counts: RunCounts;
  readonly signal: AbortSignal | undefined;
  readonly run: JobRunInfo;
}

/**
 * Pushes a file of processing/ and moves it on. A failure not the file's own (the database or the
 * platform unavailable, contacts the platform did not answer, the key refused, the lease lost, a
 * stop, anything failing once the file is read and staged) leaves it there and fails the run, so
 * the next run, here or on the replica that took the job over, pushes it again, sending only what
 * was not recorded as sent. A failure of the file itself, or a file none of whose rows could be
 * taken, moves it to failed/ with its reason, and the files after it go on.
 */
async function pushFile(deps: PushContactsDeps, options: InboxOptions, name: string, at: RunOf) {
  const processing = join(options.dir, PROCESSING);
  const path = join(processing, name);
  // Whether the push is still reading and staging the file: only a failure then can be the
  // file's own. One after (sending, recording) is the database's, the platform's or the
  // program's, whatever its SQLSTATE: the file is not parked in failed/ for it.
  const reading = { file: true };
  let destination = 'failed';
  try {
    await refuseUnreadable(path);
    const summary = EVENTS_FILE.test(name)
      ? await enqueueEvents(deps, options, path, at.counts)
      : await pushExport(deps, options, path, name, at, () => {
          reading.file = false;
        });
    const refused = everyRowRejected(summary);
    destination = summary.failed === 0 && refused === undefined ? 'processed' : 'failed';
    if (refused !== undefined) {
      deps.log.error(
        { file: name, ...summary, reportPath: undefined, reason: refused, moved: destination },
        'CRM export could not be pushed',
      );
    } else {
      deps.log.info({ file: name, ...summary, reportPath: undefined, moved: destination }, summary.message);
    }
    if (summary.read === 0) {
      deps.log.warn({ file: name }, 'CRM export held no records, only its header: nothing to push');
    }
  } catch (error) {
    if (at.signal?.aborted || !reading.file || !isFileFault(error)) throw error;
    deps.log.error(
      { file: name, reason: describeError(error), err: error, moved: destination },
      'CRM export could not be pushed',
    );
  }
  addCount(at.counts, `files_${destination}`);
  await moveWithReport(processing, name, join(options.dir, destination));
}

/**
 * A file this process may not read, refused as the file's own fault (the reader fails an empty
 * one itself).
 */
async function refuseUnreadable(path: string): Promise<void> {
  const handle = await open(path, 'r').catch((error: NodeJS.ErrnoException) => {
    throw new InboxFileError(`the file cannot be read (${error.code ?? error.message})`, { cause: error });
  });
  await handle.close();
}

interface FileOutcome {
  readonly read: number;
  /** Rows reported in the file's `.rejects.csv` as invalid (not those a later row replaced). */
  readonly rejected: number;
  /** Contacts the platform refused or was given up on: none for an events file, sent later. */
  readonly failed: number;
  readonly message: string;
}

/**
 * Why a file with rows none of which could be taken fails, as a file whose header lacks a column
 * does: such an export did not do its job (a JSON Lines key renamed, a column of bad values), and
 * in processed/ it would look pushed. Undefined when a row was taken, or there were none.
 */
function everyRowRejected(summary: FileOutcome): string | undefined {
  if (summary.read === 0 || summary.rejected < summary.read) return undefined;
  const rows = summary.read === 1 ? 'its one row was' : `every one of its ${summary.read} rows was`;
  return `${rows} rejected, nothing of it was pushed: see its .rejects.csv report for why`;
}

async function enqueueEvents(
  deps: PushContactsDeps,
  options: InboxOptions,
  path: string,
  counts: RunCounts,
): Promise<FileOutcome> {
  const summary = await enqueueEventsFile(deps.db, path, { encoding: options.push.encoding });
  addCount(counts, 'events_enqueued', summary.enqueued);
  // Its events are sent by the outbox, which retries and records each: none failed here.
  return { ...summary, failed: 0, message: 'events file enqueued' };
}

async function pushExport(
  deps: PushContactsDeps,
  options: InboxOptions,
  path: string,
  name: string,
  at: RunOf,
  staged: () => void,
): Promise<FileOutcome> {
  const summary = await pushContacts(
    deps,
    path,
    {
      ...options.push,
      mapping: options.mapping,
      rules: options.rules,
      full: false,
      dryRun: false,
      format: formatOf(name),
    },
    at.counts,
    at.run,
    at.signal,
    { update: () => {}, staged },
  );
  if (summary.unavailable > 0) {
    throw new RetryableError(
      `${summary.unavailable} contacts of ${name} were not sent: the platform was unavailable or did not answer`,
    );
  }
  return { ...summary, message: 'CRM export pushed' };
}

/**
 * An error of the file itself, raised while it is read and staged: unreadable as an export (a
 * header naming a column twice, empty, not readable by this process), holding a value the
 * database refuses, or one JavaScript cannot take. Pushing it again would fail the same way;
 * anything else is retried at the next run.
 */
function isFileFault(error: unknown): boolean {
  return (
    error instanceof RecordFileError ||
    error instanceof InboxFileError ||
    isDataError(error) ||
    VALUE_ERRORS.some((type) => error instanceof type)
  );
}

/**
 * A pushed file and its `.rejects.csv` report, from `from` into `to` (`processed/`, `failed/`). A
 * CRM that drops an export of the same name every day would have each replace the last there: a
 * name already taken gets the time of the move (`crm.2026-11-26T06-50-00-000Z.csv`).
 */
async function moveWithReport(from: string, name: string, to: string): Promise<void> {
  const taken = (await statIfThere(join(to, name))) !== undefined;
  const ext = extname(name);
  const stamp = new Date().toISOString().replaceAll(':', '-').replace('.', '-');
  const as = taken ? `${name.slice(0, name.length - ext.length)}.${stamp}${ext}` : name;
  await rename(join(from, name), join(to, as));
  await rename(join(from, `${name}.rejects.csv`), join(to, `${as}.rejects.csv`)).catch(() => {});
}
