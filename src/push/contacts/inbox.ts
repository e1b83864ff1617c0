import type { Stats } from 'node:fs';
import { lstat, mkdir, readdir, readlink, rename, stat } from 'node:fs/promises';
import { basename, extname, join, resolve, sep } from 'node:path';
import type { ContactMapping, EventRule } from '../../config/configFile.js';
import { isDataError } from '../../db/dataError.js';
import { describeError, FatalError, RetryableError } from '../../errors.js';
import { JOB } from '../../jobs/jobNames.js';
import { NO_FENCE } from '../../jobs/lease.js';
import { addCount, type RunCounts } from '../../jobs/runCounts.js';
import type { JobRunInfo } from '../../jobs/runner.js';
import type { JobSpec } from '../../jobs/scheduler.js';
import { enqueueEventsFile } from '../events/enqueueFile.js';
import { MAX_RETRY_AFTER_MS } from '../events/sendPolicy.js';
import { formatOf, RecordFileError } from '../readRecords.js';
import { addFileReason, ignoreGone, isReportName, REPORT_SUFFIX, reportPathOf } from '../rejectReport.js';
import {
  ContactsRetryAfterError,
  type PushContactsDeps,
  type PushContactsOptions,
  pushContacts,
} from './pushContacts.js';

const EXPORT_FILE = /\.(csv|tsv|txt|jsonl|ndjson)$/i;
/** The time a name already taken in processed/ or failed/ is given (`crm.2026-11-26T06-50-00-000Z.csv`). */
const MOVE_STAMP = /^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$/;
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
 * report to `processed/` (every valid row on the platform, or given up on an earlier push and
 * named in the report) or `failed/`. The directory is polled, since fs.watch misses events on
 * Docker volumes and network mounts. A file is taken only once its size, time and inode have
 * stayed the same for the settle time: one still being written is left for a later poll. The job
 * is exclusive, so on a shared volume one replica takes each file; a file it leaves in
 * `processing/` (killed, its lease lost, the platform down) is pushed again by the next run, here
 * or on another replica, before any file of the inbox.
 */
export function contactsInboxJob(deps: PushContactsDeps, options: InboxOptions): JobSpec {
  const seen = new Map<string, { size: number; mtimeMs: number; ino: number; since: number }>();
  /** The inode each entry left in place (whyLeft) was named for, by key: named once, not each poll. */
  const named = new Map<string, number>();
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
   * Forgets the entries of one directory (`ofDir` tells its keys) that are no longer listed:
   * deleted or moved away, they would otherwise be remembered for the life of the process.
   */
  const forgetGone = (listed: readonly string[], ofDir: (key: string) => boolean): void => {
    const present = new Set(listed);
    for (const memory of [seen, named]) {
      for (const key of memory.keys()) if (ofDir(key) && !present.has(key)) memory.delete(key);
    }
  };

  /**
   * Whether the entry at `path` is one the inbox leaves where it is (whyLeft). It is named in the
   * log and counted (`files_refused`) once, not at every poll, and again once replaced by another.
   */
  const leftInPlace = (key: string, path: string, stats: Stats, counts: RunCounts): boolean => {
    const reason = whyLeft(stats);
    if (reason === undefined) {
      named.delete(key);
      return false;
    }
    if (named.get(key) !== stats.ino) {
      named.set(key, stats.ino);
      addCount(counts, 'files_refused');
      deps.log.error({ file: basename(path), path, reason }, 'CRM export could not be pushed');
    }
    return true;
  };

  /**
   * Moves a settled file of the inbox into processing/, and gives its stats there; undefined when
   * it is not taken this time. A name that is not valid UTF-8 (Latin-1 from an SMB or FTP drop) is
   * given its windows-1252 reading there, as everything after reads paths as text.
   */
  const take = async (entry: ExportEntry, counts: RunCounts): Promise<Stats | undefined> => {
    const from = pathIn(options.dir, entry);
    const stats = await lstatIfThere(from);
    if (stats === undefined || leftInPlace(entry.key, join(options.dir, entry.name), stats, counts)) {
      return undefined;
    }
    if (!settled(entry.key, stats)) return undefined;
    const to = join(processing, entry.name);
    // One of its name still there (pushed again after a failure not its own) goes first.
    if ((await lstatIfThere(to)) !== undefined) return undefined;
    if (!isNamed(entry)) {
      deps.log.warn(
        { file: entry.name, bytes: entry.raw.toString('hex') },
        'CRM export name is not valid UTF-8: read as windows-1252 and renamed so',
      );
    }
    await rename(from, to);
    // Replaced between the look and the rename: it settles in processing/ first.
    const moved = await lstat(to);
    if (moved.ino !== stats.ino || moved.size !== stats.size || moved.mtimeMs !== stats.mtimeMs) {
      settled(`${PROCESSING}/${entry.name}`, moved);
      return undefined;
    }
    return moved;
  };

  // Until when the platform asked to be sent no contacts (the Retry-After of a 429 or a 503 that
  // the client's retries did not wait out), and the answer that asked: kept across runs, or every
  // poll would send the requests it has in flight into the same answer again. In memory: a
  // restart, or another replica taking the job, tries once more, and stops at the first again.
  // At most an hour, as the outbox waits: the header is the platform's text, and a Retry-After of
  // years would hold every contacts export until a restart, and is past what a Date can say.
  let heldOff = { until: 0, status: 0 };

  return {
    name: JOB.contactsInbox,
    schedule: options.schedule,
    runAtStart: options.schedule !== 'off',
    run: async (counts, signal, run) => {
      for (const sub of ['processed', 'failed', PROCESSING]) {
        await mkdir(join(options.dir, sub), { recursive: true });
      }
      await finishMoves(deps, options.dir);
      // The first contacts export of this run the platform would not take (a Retry-After, or its
      // contacts route down): the run fails with it once the other files are done. Events files
      // go on, since they send nothing to the platform here, so lifecycle events never wait on the
      // contacts route; contacts exports wait, so none is pushed after an older one left behind.
      let contactsStopped: RetryableError | undefined;
      const waitsForContacts = (name: string) => !EVENTS_FILE.test(name) && contactsStopped !== undefined;
      // Whether `name` is a contacts export the platform's wait holds back: then the run fails
      // with the wait once the other files are done.
      const heldBack = (name: string): boolean => {
        if (EVENTS_FILE.test(name) || Date.now() >= heldOff.until) return false;
        contactsStopped ??= new RetryableError(
          `${name} not pushed: the platform asked for no contacts before ${new Date(heldOff.until).toISOString()} (the Retry-After of a ${heldOff.status})`,
        );
        return true;
      };
      const pushTaken = async (name: string, stats: Stats) => {
        if (heldBack(name)) return;
        try {
          await pushFile(deps, options, name, stats, {
            counts,
            signal,
            run: run ?? { runId: undefined, fence: NO_FENCE },
          });
        } catch (error) {
          if (error instanceof ContactsRetryAfterError) {
            const wait = Math.min(error.retryAfterMs, MAX_RETRY_AFTER_MS);
            heldOff = { until: Date.now() + wait, status: error.status };
          }
          // Any other failure (the database, the key refused, the lease lost, a bug) ends the run
          // at once, as it always has: it is not the contacts route's alone.
          if (signal?.aborted || EVENTS_FILE.test(name) || !(error instanceof RetryableError)) throw error;
          contactsStopped ??= error;
        }
      };
      // Left by a run before this one: first, so no export is pushed after a newer one of its name.
      const left = await listExports(processing);
      forgetGone(
        left.map((entry) => `${PROCESSING}/${entry.name}`),
        (key) => key.startsWith(`${PROCESSING}/`),
      );
      for (const entry of left) {
        signal?.throwIfAborted();
        if (waitsForContacts(entry.name)) continue;
        const key = `${PROCESSING}/${entry.name}`;
        // Removed by hand since the listing: nothing to push.
        const stats = await lstatIfThere(pathIn(processing, entry));
        if (stats === undefined) {
          seen.delete(key);
          continue;
        }
        if (leftInPlace(key, join(processing, entry.name), stats, counts)) continue;
        if (!isNamed(entry)) {
          // Put there by hand under a name not valid UTF-8: given its reading, as when taken.
          if ((await lstatIfThere(join(processing, entry.name))) !== undefined) continue;
          await rename(pathIn(processing, entry), join(processing, entry.name));
        }
        if (seen.has(key) && !settled(key, stats)) continue;
        await pushTaken(entry.name, stats);
      }
      const dropped = await listExports(options.dir);
      forgetGone(
        dropped.map((entry) => entry.key),
        (key) => !key.startsWith(`${PROCESSING}/`),
      );
      for (const entry of dropped) {
        signal?.throwIfAborted();
        if (waitsForContacts(entry.name)) continue;
        // Left in the inbox while held, rather than taken only to wait in processing/.
        if (heldBack(entry.name)) continue;
        const taken = await take(entry, counts);
        if (taken !== undefined) await pushTaken(entry.name, taken);
      }
      if (contactsStopped !== undefined) throw contactsStopped;
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
 * listed with U+FFFD in it, a path that does not exist, and be skipped for ever. Entries of every
 * kind are listed, told apart by the lstat made before one is taken: a symbolic link is refused
 * with its reason (refuseLink), a directory or a pipe named (whyLeft), none passed over unsaid. Our own
 * reports are not exports, though one left by a killed push has an export's extension.
 */
async function listExports(dir: string): Promise<ExportEntry[]> {
  const entries = await readdir(dir, { encoding: 'buffer' });
  return entries
    .map((raw) => {
      const utf8 = raw.toString('utf8');
      const name = Buffer.from(utf8).equals(raw) ? utf8 : WINDOWS_1252.decode(raw);
      return { raw, name, key: raw.toString('hex') };
    })
    .filter(({ name }) => !name.startsWith('.') && EXPORT_FILE.test(name) && !isReportName(name))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * The stats of the entry itself (a symbolic link's, not its target's: a dangling one is there),
 * or undefined when it is gone (moved or deleted by someone else).
 */
function lstatIfThere(path: string | Buffer): Promise<Stats | undefined> {
  return lstat(path).catch(ignoreGone);
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
async function pushFile(
  deps: PushContactsDeps,
  options: InboxOptions,
  name: string,
  stats: Stats,
  at: RunOf,
) {
  const processing = join(options.dir, PROCESSING);
  const path = join(processing, name);
  // Whether the push is still reading and staging the file: only a failure then can be the
  // file's own. One after (sending, recording) is the database's, the platform's or the
  // program's, whatever its SQLSTATE: the file is not parked in failed/ for it.
  const reading = { file: true };
  let destination = 'failed';
  try {
    await refuseLink(path, stats, options.dir);
    const file: TakenFile = { path, name, taken: stats };
    const summary = EVENTS_FILE.test(name)
      ? await enqueueEvents(deps, options, file, at.counts)
      : await pushExport(deps, options, file, at, () => {
          reading.file = false;
        });
    const refused = everyRowRejected(summary);
    destination = summary.failed === 0 && refused === undefined ? 'processed' : 'failed';
    if (refused !== undefined) {
      deps.log.error(
        {
          file: name,
          ...summary,
          reportPath: undefined,
          reason: `${refused}: see its .rejects.csv report for why`,
          moved: destination,
        },
        'CRM export could not be pushed',
      );
      await reportFileReason(deps, path, `${refused}: see the rows above for why`);
    } else {
      deps.log.info({ file: name, ...summary, reportPath: undefined, moved: destination }, summary.message);
    }
    if (summary.read === 0) {
      deps.log.warn({ file: name }, 'CRM export held no records, only its header: nothing to push');
    }
  } catch (error) {
    if (at.signal?.aborted || !reading.file || !isFileFault(error)) throw error;
    const reason = describeError(error);
    deps.log.error({ file: name, reason, err: error, moved: destination }, 'CRM export could not be pushed');
    // Beside the file in failed/, not only in a log the operator may no longer have.
    await reportFileReason(deps, path, reason);
  }
  addCount(at.counts, `files_${destination}`);
  await moveWithReport(processing, name, join(options.dir, destination));
}

/**
 * Adds why the export at `path` was refused to its report. A report that cannot be written (a
 * full disk, a read-only directory) is logged and never keeps the export from moving on: the
 * reason is in the log line just before.
 */
async function reportFileReason(deps: PushContactsDeps, path: string, reason: string): Promise<void> {
  await addFileReason(path, deps.scrubber.scrub(reason)).catch((error: unknown) =>
    deps.log.warn({ file: path, err: error }, "could not add the export's reason to its .rejects.csv report"),
  );
}

/**
 * A symbolic link (`stats`, its lstat as taken), refused as the file's own fault. Its target is
 * not moved with it, so the file read would not be the file kept in processed/, and the CRM could
 * rewrite it during the push; a relative link would point elsewhere once moved; and it would let
 * whoever may write to the inbox have the daemon read any file it can. `dir` is where links are
 * dropped: a relative target is read from there, to say what it points to.
 */
async function refuseLink(path: string, stats: Stats, dir: string): Promise<void> {
  if (!stats.isSymbolicLink()) return;
  const target = await readlink(path);
  throw new InboxFileError(
    `it is a symbolic link, to ${JSON.stringify(target)} (${await targetKindOf(resolve(dir, target))}): the inbox takes regular files only; copy the file into the inbox instead (written under another name, then renamed)`,
  );
}

/** What a link's target is, for its refusal: a dangling link or one to a directory said so. */
async function targetKindOf(target: string): Promise<string> {
  try {
    // stat, not open: a target that is a pipe is named, never read.
    return kindOf(await stat(target));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? 'which does not exist' : `which cannot be followed: ${code}`;
  }
}

/** What an entry is, for a refusal's reason. */
function kindOf(stats: Stats): string {
  if (stats.isFile()) return 'a regular file';
  if (stats.isDirectory()) return 'a directory';
  if (stats.isSymbolicLink()) return 'a symbolic link';
  if (stats.isFIFO()) return 'a named pipe';
  return stats.isSocket() ? 'a socket' : 'a device file';
}

/**
 * Why an entry of the inbox, or of processing/, is left where it is; undefined for one the inbox
 * takes (a regular file, or a symbolic link, taken to be refused: refuseLink). Unlike a link, it is
 * not moved to failed/. A directory would be moved with all it holds, perhaps while a tool still
 * writes into it (some write an export as a directory of parts), since its own size and time say
 * nothing of what is inside, so settling cannot tell it complete; and one that is a mount point
 * cannot be renamed at all (EBUSY), which would fail every run and hold up every file after it. A
 * pipe holds nothing to keep in failed/, and the inbox never opens one: a read would wait for a
 * writer, for ever if none comes. So both stay for the operator to remove, named in the log.
 */
function whyLeft(stats: Stats): string | undefined {
  if (stats.isFile() || stats.isSymbolicLink()) return undefined;
  const pipe = stats.isFIFO() ? ', never opened (a read would wait for a writer)' : '';
  return `it is ${kindOf(stats)}, not a file${pipe}: the inbox takes regular files only, and leaves it where it is; remove it, and drop the export as a file (written under another name, then renamed)`;
}

interface FileOutcome {
  readonly read: number;
  /** Rows reported in the file's `.rejects.csv` as invalid (not those a later row replaced). */
  readonly rejected: number;
  /**
   * Contacts that failed in this push: refused, or given up in it (not those given up earlier that
   * the export holds unchanged: see PushSummary.stillGivenUp). None for an events file, sent later.
   */
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
  return `${rows} rejected, nothing of it was pushed`;
}

/** A file taken into processing/: where it is now, its name, and what it was when taken. */
interface TakenFile {
  readonly path: string;
  readonly name: string;
  /** Read only if the file at `path` is still this one (openExport's `sameAs`). */
  readonly taken: Stats;
}

async function enqueueEvents(
  deps: PushContactsDeps,
  options: InboxOptions,
  { path, taken }: TakenFile,
  counts: RunCounts,
): Promise<FileOutcome> {
  const summary = await enqueueEventsFile(deps.db, path, { encoding: options.push.encoding, sameAs: taken });
  addCount(counts, 'events_enqueued', summary.enqueued);
  // Its events are sent by the outbox, which retries and records each: none failed here.
  return { ...summary, failed: 0, message: 'events file enqueued' };
}

async function pushExport(
  deps: PushContactsDeps,
  options: InboxOptions,
  { path, name, taken }: TakenFile,
  at: RunOf,
  staged: () => void,
): Promise<FileOutcome> {
  const summary = await pushContacts(
    deps,
    path,
    {
      sameAs: taken,
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
 * A pushed file and its `.rejects.csv` report, from `from` into `to` (`processed/`, `failed/`).
 * The file first: a process stopped between the two moves leaves its report alone in
 * processing/, which the next run moves beside it (finishMoves); the report first would leave
 * the file there, to be pushed again.
 */
async function moveWithReport(from: string, name: string, to: string): Promise<void> {
  const as = await freeName(to, name);
  await rename(join(from, name), join(to, as));
  await rename(reportPathOf(join(from, name)), reportPathOf(join(to, as))).catch(ignoreGone);
}

/**
 * The name `name` is moved under into `to`. A CRM that drops an export of the same name every
 * day would have each replace the last there: a name already taken gets the time of the move.
 */
async function freeName(to: string, name: string): Promise<string> {
  // The report's name too: one kept there alone (its export removed by hand, or moved there by
  // finishMove) would otherwise be replaced by this export's.
  const taken = await Promise.all([join(to, name), reportPathOf(join(to, name))].map(lstatIfThere));
  if (taken.every((stats) => stats === undefined)) return name;
  const [base, ext] = splitExt(name);
  return `${base}.${new Date().toISOString().replaceAll(':', '-').replace('.', '-')}${ext}`;
}

const splitExt = (name: string): [string, string] => {
  const ext = extname(name);
  return [name.slice(0, name.length - ext.length), ext];
};

/**
 * Finishes the moves a process stopped between moving a file and moving its report left undone:
 * a report of processing/ without its export there goes beside that export, in processed/ or
 * failed/. Without it, the report would stay there for good, and be overwritten by the next
 * export of its name.
 */
async function finishMoves(deps: PushContactsDeps, dir: string): Promise<void> {
  for (const entry of await readdir(join(dir, PROCESSING), { withFileTypes: true })) {
    if (entry.isFile() && isReportName(entry.name)) await finishMove(deps, dir, entry.name);
  }
}

async function finishMove(deps: PushContactsDeps, dir: string, reportName: string): Promise<void> {
  const name = reportName.slice(0, reportName.length - REPORT_SUFFIX.length);
  const from = join(dir, PROCESSING, reportName);
  // Its export still there: a push stopped before its end, whose next push rewrites it.
  if ((await lstatIfThere(join(dir, PROCESSING, name))) !== undefined) return;
  const report = await lstatIfThere(from);
  if (report === undefined) return;
  const beside = await movedExport(dir, name, report.mtimeMs);
  if (beside !== undefined) {
    await rename(from, reportPathOf(beside));
    deps.log.info(
      { file: name, report: beside },
      'moved a report a stopped run left in processing/ beside its export',
    );
    return;
  }
  // Kept where an operator looks for reports, rather than dropped.
  const to = join(dir, 'failed', await freeName(join(dir, 'failed'), reportName));
  await rename(from, to);
  deps.log.warn(
    { file: name, report: to },
    'a report in processing/ had no export there, nor in processed/ or failed/ (removed by hand?): moved to failed/',
  );
}

/**
 * The path of the export `name` moved just before its report: in processed/ or failed/, under
 * its name or a stamped one, without a report beside it, moved (its ctime, which a rename sets)
 * no earlier than its report was last written; the latest such, or undefined.
 */
async function movedExport(dir: string, name: string, reportWritten: number): Promise<string | undefined> {
  let found: { path: string; at: number } | undefined;
  for (const place of ['processed', 'failed']) {
    for (const candidate of await readdir(join(dir, place))) {
      if (!isMovedAs(name, candidate)) continue;
      const path = join(dir, place, candidate);
      if ((await lstatIfThere(reportPathOf(path))) !== undefined) continue;
      const stats = await lstatIfThere(path);
      if (stats === undefined || stats.ctimeMs < reportWritten) continue;
      if (found === undefined || stats.ctimeMs > found.at) found = { path, at: stats.ctimeMs };
    }
  }
  return found?.path;
}

/** Whether `candidate` is a name `name` may have been moved under (freeName). */
function isMovedAs(name: string, candidate: string): boolean {
  if (candidate === name) return true;
  const [base, ext] = splitExt(name);
  if (!candidate.startsWith(`${base}.`) || !candidate.endsWith(ext)) return false;
  return MOVE_STAMP.test(candidate.slice(base.length + 1, candidate.length - ext.length));
}
