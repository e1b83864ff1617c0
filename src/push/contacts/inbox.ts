import { mkdir, readdir, rename, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import type { ContactMapping, EventRule } from '../../config/configFile.js';
import { isDataError } from '../../db/dataError.js';
import { RetryableError } from '../../errors.js';
import { JOB } from '../../jobs/jobNames.js';
import { NO_FENCE } from '../../jobs/lease.js';
import { addCount } from '../../jobs/runCounts.js';
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
  readonly push: Omit<PushContactsOptions, 'mapping' | 'full' | 'dryRun'>;
}

/**
 * The CRM inbox of `run`: exports dropped into a directory are pushed once, then moved with their
 * report to `processed/` (every valid row on the platform) or `failed/`. The directory is polled,
 * since fs.watch misses events on Docker volumes and network mounts. A file is read only once
 * its size and time have stayed the same for the settle time: one still being written is left for
 * a later poll. The job is exclusive, so on a shared volume one replica takes each file.
 */
export function contactsInboxJob(deps: PushContactsDeps, options: InboxOptions): JobSpec {
  const seen = new Map<string, { size: number; mtimeMs: number; since: number }>();
  return {
    name: JOB.contactsInbox,
    schedule: options.schedule,
    runAtStart: options.schedule !== 'off',
    run: async (counts, signal, run) => {
      await mkdir(join(options.dir, 'processed'), { recursive: true });
      await mkdir(join(options.dir, 'failed'), { recursive: true });
      const names = (await readdir(options.dir, { withFileTypes: true }))
        .filter(
          (e) =>
            e.isFile() && !e.name.startsWith('.') && EXPORT_FILE.test(e.name) && !REPORT_FILE.test(e.name),
        )
        .map((e) => e.name)
        .sort();
      for (const name of names) {
        signal?.throwIfAborted();
        const path = join(options.dir, name);
        // Gone since the listing (moved or deleted by someone else): nothing to push.
        const stats = await stat(path).catch((error: NodeJS.ErrnoException) => {
          if (error.code === 'ENOENT') return undefined;
          throw error;
        });
        if (stats === undefined) continue;
        const { size, mtimeMs } = stats;
        // Read per file: the pushes before it in this run may have taken minutes.
        const now = Date.now();
        const before = seen.get(name);
        if (before === undefined || before.size !== size || before.mtimeMs !== mtimeMs) {
          seen.set(name, { size, mtimeMs, since: now });
          continue;
        }
        if (now - before.since < options.settleMs) continue;
        seen.delete(name);
        let destination = 'failed';
        try {
          if (EVENTS_FILE.test(name)) {
            const summary = await enqueueEventsFile(deps.db, path);
            destination = 'processed';
            deps.log.info(
              { file: name, ...summary, reportPath: undefined, moved: destination },
              'events file enqueued',
            );
            addCount(counts, 'events_enqueued', summary.enqueued);
            addCount(counts, `files_${destination}`);
            await moveWithReport(options.dir, name, destination);
            continue;
          }
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
            counts,
            run ?? { runId: undefined, fence: NO_FENCE },
            signal,
          );
          if (summary.unavailable > 0) {
            throw new RetryableError(
              `${summary.unavailable} contacts of ${name} were not sent: the platform was unavailable or did not answer`,
            );
          }
          if (summary.failed === 0) destination = 'processed';
          deps.log.info(
            { file: name, ...summary, reportPath: undefined, moved: destination },
            'CRM export pushed',
          );
        } catch (error) {
          // Not the file's fault (the database or the platform unavailable, contacts the platform
          // did not answer, the key refused, the lease lost, a stop): it stays in place and the
          // run fails, so the next run, here or on the replica that took the job over, pushes it
          // again, sending only what was not recorded as sent. Only a file that cannot be taken
          // as it is goes to failed/.
          if (!isFileFault(error)) throw error;
          deps.log.error({ file: name, err: error }, 'CRM export could not be pushed');
        }
        addCount(counts, `files_${destination}`);
        await moveWithReport(options.dir, name, destination);
      }
    },
  };
}

/**
 * An error of the file itself: unreadable as an export (a header naming a column twice, …), or
 * holding a value the database refuses. Pushing it again would fail the same way.
 */
function isFileFault(error: unknown): boolean {
  return error instanceof RecordFileError || isDataError(error);
}

/**
 * A pushed file and its `.rejects.csv` report, into `processed/` or `failed/`. A CRM that drops
 * an export of the same name every day would have each replace the last there: a name already
 * taken gets the time of the move (`crm.2026-11-26T06-50-00-000Z.csv`).
 */
async function moveWithReport(dir: string, name: string, destination: string): Promise<void> {
  const taken = await stat(join(dir, destination, name)).then(
    () => true,
    () => false,
  );
  const ext = extname(name);
  const stamp = new Date().toISOString().replaceAll(':', '-').replace('.', '-');
  const as = taken ? `${name.slice(0, name.length - ext.length)}.${stamp}${ext}` : name;
  await rename(join(dir, name), join(dir, destination, as));
  await rename(join(dir, `${name}.rejects.csv`), join(dir, destination, `${as}.rejects.csv`)).catch(() => {});
}
