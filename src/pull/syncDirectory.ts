import { readDatabaseNow } from '../db/clockSql.js';
import { describeError, RetryableError } from '../errors.js';
import { JOB } from '../jobs/jobNames.js';
import { type Fence, NO_FENCE } from '../jobs/lease.js';
import { addCount, type RunCounts } from '../jobs/runCounts.js';
import {
  type DirectoryTable,
  directoryIdText,
  markListed,
  markRemovedDirectory,
  probeTarget,
  readStoredProfessionals,
  unlistedSince,
  upsertLocations,
  upsertProfessionals,
} from '../mirror/directorySql.js';
import { quarantineRecords, rejectedRecordId } from '../mirror/quarantineSql.js';
import type { CheckedRecord } from '../partner-api/directoryPages.js';
import { ApiRequestError, ApiUnavailableError } from '../partner-api/errors.js';
import type { Professional } from '../partner-api/professionalsSchema.js';
import type { RejectedRecord } from '../partner-api/validRecords.js';
import type { PullContext } from './context.js';
import { mapBounded } from './mapBounded.js';
import { needsDetail } from './professionalDetail.js';

// Spec 4.4/4.5: a list returns active records unless asked for inactive ones; both make the whole.
const BOTH = [true, false] as const;

/**
 * Mirrors every location, active and inactive, page by page. Records the complete listing did
 * not return are marked removed; a listing that fails halfway marks nothing.
 */
export async function syncLocations(
  ctx: PullContext,
  counts: RunCounts,
  signal?: AbortSignal,
  fence: Fence = NO_FENCE,
): Promise<void> {
  const { db, api } = ctx;
  const startedAt = await readDatabaseNow(db.knex);
  const reads = new SingleReads(ctx, 'locations', counts, signal, (slug) => api.locations.read(slug, signal));
  for (const active of BOTH) {
    for await (const page of api.locations.pages(active, null, signal)) {
      addCount(counts, 'pages');
      addCount(counts, 'fetched', await upsertLocations(db.knex, db, page.items));
      await quarantineListed(ctx, 'locations', page.rejected, counts);
    }
  }
  await confirmUnlisted(ctx, 'locations', startedAt, counts, reads, (found) =>
    upsertLocations(db.knex, db, found),
  );
  reads.failIfDown();
  addCount(counts, 'removed', await markRemovedFenced(ctx, 'locations', startedAt, fence));
  ctx.metrics?.lastCompleteWalk.set({ sync_job: JOB.locations }, Date.now() / 1000);
}

/**
 * Mirrors every professional, active and inactive, with `location_id` from single reads (at most
 * `detailConcurrency` at once) where the mirror lacks it or the listed record changed; `full`
 * re-reads every one. Removal as for locations.
 *
 * A single read that fails for its record alone (see `recordReadFailure`) is that record's
 * failure: its listed fields are stored without its `location_id`, it counts as listed, it is
 * logged and counted (`details_failed`), and the next run reads it again; the rest goes on. A
 * single read that is down altogether fails the run instead, once the listings are stored (see
 * SingleReads).
 */
export async function syncProfessionals(
  ctx: PullContext,
  counts: RunCounts,
  options: { full: boolean },
  signal?: AbortSignal,
  fence: Fence = NO_FENCE,
): Promise<void> {
  const { db, api, log } = ctx;
  const startedAt = await readDatabaseNow(db.knex);
  const reads = new SingleReads(ctx, 'professionals', counts, signal, (slug) =>
    api.professionals.read(slug, signal),
  );
  for (const active of BOTH) {
    for await (const page of api.professionals.pages(active, null, signal)) {
      const stored = await readStoredProfessionals(
        db.knex,
        db,
        page.items.map((p) => p.id),
      );
      const toRead = page.items.filter((item) =>
        needsDetail(stored.get(item.id), item, { full: options.full, now: startedAt }),
      );
      const details = new Map<string, Professional>();
      // A single record failing its schema is quarantined; its listed fields are stored without it.
      const rejectedDetails: RejectedRecord[] = [];
      // A read answered with an error or no record instead (or not made, the single read being
      // down): stored without it too, read next run.
      let failed = 0;
      let skipped = 0;
      await mapBounded(toRead, ctx.detailConcurrency, async (item) => {
        const read = await reads.read(item);
        if (read === 'skipped') skipped++;
        else if (read === undefined) return;
        else if ('record' in read) details.set(item.id, read.record);
        else if ('rejected' in read) rejectedDetails.push(read.rejected);
        else {
          failed++;
          warnFailedRead(ctx, 'professionals', item, read.failed);
        }
      });
      const missing = toRead.length - details.size - rejectedDetails.length - failed - skipped;
      if (missing > 0) log.info({ missing }, 'professionals renamed or gone since listed; read next run');
      if (failed > 0) addCount(counts, 'details_failed', failed);
      const written = await upsertProfessionals(
        db.knex,
        db,
        page.items.map((item) => ({ item, detail: details.get(item.id) })),
      );
      addCount(counts, 'pages');
      addCount(counts, 'fetched', written);
      addCount(counts, 'details', details.size);
      await quarantineListed(ctx, 'professionals', [...(page.rejected ?? []), ...rejectedDetails], counts);
    }
  }
  // Down during the listings: no unlisted record could be confirmed, and none is marked removed.
  reads.failIfDown();
  await confirmUnlisted(ctx, 'professionals', startedAt, counts, reads, (found) =>
    upsertProfessionals(
      db.knex,
      db,
      found.map((p) => ({ item: p, detail: p })),
    ),
  );
  reads.failIfDown();
  addCount(counts, 'removed', await markRemovedFenced(ctx, 'professionals', startedAt, fence));
  ctx.metrics?.lastCompleteWalk.set({ sync_job: JOB.professionals }, Date.now() / 1000);
}

/**
 * Records a listing or a single read returned that failed their schema go to the quarantine, and
 * the rest was stored. A stored record among them (by its id, or one of `alsoListed`) still exists
 * on the platform: it counts as listed, keeping its last valid version, instead of being removed.
 */
async function quarantineListed(
  ctx: PullContext,
  resource: DirectoryTable,
  rejected: readonly RejectedRecord[] | undefined,
  counts: RunCounts,
  alsoListed: readonly string[] = [],
): Promise<void> {
  if (rejected === undefined || rejected.length === 0) return;
  const ids = [...alsoListed];
  for (const r of rejected) {
    // As sent, for the log; markListed compares it as the mirror stores ids (directoryIdText).
    const id = rejectedRecordId(r.raw);
    if (id !== null) ids.push(id);
    ctx.log.warn({ resource, recordId: id, reason: r.reason }, 'directory record quarantined');
  }
  const added = await ctx.db.knex.transaction(async (trx) => {
    await markListed(trx, ctx.db, resource, ids);
    return quarantineRecords(trx, ctx.db, rejected, { table: 'directory_quarantine', resource });
  });
  addCount(counts, 'quarantined', rejected.length);
  ctx.metrics?.directoryQuarantined.inc({ resource }, added);
}

/** Removal is the walk's decision: only the replica still holding the job's lease makes it. */
function markRemovedFenced(
  ctx: PullContext,
  tableName: DirectoryTable,
  startedAt: Date,
  fence: Fence,
): Promise<number> {
  return ctx.db.knex.transaction(async (trx) => {
    const removed = await markRemovedDirectory(trx, ctx.db, tableName, startedAt);
    await fence(trx);
    return removed;
  });
}

/**
 * Single reads in a row that got no record (each failing for its record alone, see
 * `recordReadFailure`) after which a run asks whether the single read itself is down.
 *
 * A record that fails is that record's failure, and the run goes on. But when every read fails,
 * the trouble is not in the records: the route is down, or answers every record the same error
 * (a proxy, a changed API). Going on would spend the retry budget of every record in turn (a run
 * of hours, for a directory of thousands), and end as a success that stored no `location_id`
 * nor confirmed any removal: the job's alert would never fire. So from this many failures in a
 * row the run reads one record it knows to exist (`probeTarget` in directorySql.ts); when that one
 * fails too, the run stops reading, stores the listings, marks nothing removed, and fails as
 * retryable.
 *
 * Not one: an incremental run reads only the new, changed or unread records, and a record whose
 * read fails for good is among them on every run, often alone. Three distinct records failing with
 * nothing read between them is rarely three bad records; and when it is (three records the
 * platform always refuses, read together by every incremental run), the probe reads well and the
 * run goes on, instead of failing every run on them.
 */
const SINGLE_READS_DOWN_AFTER = 3;

/** A record as the single read asks for it: by its slug, and checked against its id. */
interface RecordRef {
  readonly id: string | number;
  readonly slug: string;
}

/**
 * The single reads of one run (a professional's detail, an unlisted record's confirmation): each
 * read through `readIfSame`, counting failures in a row until one gets an answer, and probing the
 * route once that count reaches SINGLE_READS_DOWN_AFTER.
 */
class SingleReads<T extends { id: string | number }> {
  #inARow = 0;
  readonly #failedIds: string[] = [];
  #probing: Promise<void> | undefined;
  #down: { readonly failures: number; readonly probed: boolean; readonly last: string } | undefined;

  constructor(
    private readonly ctx: PullContext,
    private readonly resource: DirectoryTable,
    private readonly counts: RunCounts,
    private readonly signal: AbortSignal | undefined,
    /** The resource's single read (`GET /{resource}/:slug`). */
    private readonly bySlug: (slug: string) => Promise<CheckedRecord<T>>,
  ) {}

  /** The read, or `skipped` (not made) once the single read is taken for down. */
  async read(record: RecordRef): Promise<CheckedRecord<T> | undefined | 'skipped'> {
    if (this.#down !== undefined) {
      addCount(this.counts, 'reads_skipped');
      return 'skipped';
    }
    const checked = await this.#readIfSame(record);
    if (checked === undefined || !('failed' in checked)) {
      this.#inARow = 0;
      return checked;
    }
    this.#failedIds.push(directoryIdText(record.id));
    if (++this.#inARow >= SINGLE_READS_DOWN_AFTER) {
      // Reads failing while the probe is out wait for its verdict rather than probe again.
      this.#probing ??= this.#probeRoute(checked.failed).finally(() => {
        this.#probing = undefined;
      });
      await this.#probing;
    }
    return checked;
  }

  /** Fails the run (retryable) when the single read was taken for down. */
  failIfDown(): void {
    if (this.#down === undefined) return;
    throw new RetryableError(
      `the single read of ${this.resource} (GET /${this.resource}/:slug) failed for ` +
        `${this.#down.failures} records in a row, none read between them, ` +
        (this.#down.probed ? 'and for a record known to exist' : 'and no record known to exist to try') +
        `: taken for down; the listings are stored, nothing is marked removed, the next run reads ` +
        `again (last: ${this.#down.last})`,
    );
  }

  /**
   * Reads a record known to exist. Read (valid or not), the failures were their records' own and
   * the count starts again; failed, not found, or with no record to try (an empty mirror), the
   * single read is down. A failure that is not about a record (a 429, no answer) throws, as it
   * would from any read, and fails the run.
   */
  async #probeRoute(last: string): Promise<void> {
    const failures = this.#inARow;
    const { db } = this.ctx;
    const target = await probeTarget(db.knex, db, this.resource, this.#failedIds);
    const checked = target === undefined ? undefined : await this.#readIfSame(target);
    if (target !== undefined) addCount(this.counts, 'reads_probed');
    if (checked !== undefined && !('failed' in checked)) this.#inARow = 0;
    else this.#down ??= { failures, probed: target !== undefined, last };
  }

  #readIfSame(record: RecordRef): Promise<CheckedRecord<T> | undefined> {
    return readIfSame(record.id, () => this.bySlug(record.slug), this.signal);
  }
}

/**
 * Why a single read's failure is its record's alone, or undefined when it is not (then it fails
 * the run): the platform answered this one request with an error status, a refusal (any 4xx but
 * 401 and a 403 of the key, which the transport throws as ApiAuthError; a 404 is handled before
 * as not found) or a server error (5xx, once the transport's retries are spent). Another record
 * may read well, and a run stopped on this one would stop on it every time.
 *
 * Not the record's: no answer at all (a network failure or a timeout, no status), a 429 (the
 * platform throttles the key, not the record: every read after it would be throttled too), a
 * refused key, the run's own abort (shutdown, a lost lease), or anything else (a database error).
 */
function recordReadFailure(error: unknown, signal: AbortSignal | undefined): string | undefined {
  if (signal?.aborted) return undefined;
  if (error instanceof ApiRequestError) return describeError(error);
  if (error instanceof ApiUnavailableError && error.status !== undefined && error.status !== 429) {
    return describeError(error);
  }
  return undefined;
}

/**
 * The single record by slug, or undefined when the slug no longer names the record with `id`
 * (renamed or deleted since the listing: a 404). One that fails its schema is taken as that
 * record unless the id it carries (compared as the mirror stores ids: a UUID in any case) says
 * otherwise; a read answered with an error, or failing for its record alone (see
 * `recordReadFailure`), comes back as failed. Any other failure is thrown.
 */
async function readIfSame<T extends { id: string | number }>(
  id: string | number,
  read: () => Promise<CheckedRecord<T>>,
  signal: AbortSignal | undefined,
): Promise<CheckedRecord<T> | undefined> {
  try {
    const checked = await read();
    if ('record' in checked) return checked.record.id === id ? checked : undefined;
    if ('failed' in checked) return checked;
    const carried = rejectedRecordId(checked.rejected.raw);
    return carried === null || directoryIdText(carried) === directoryIdText(id) ? checked : undefined;
  } catch (error) {
    if (error instanceof ApiRequestError && error.status === 404) return undefined;
    const failed = recordReadFailure(error, signal);
    if (failed === undefined) throw error;
    return { failed };
  }
}

function warnFailedRead(
  ctx: PullContext,
  resource: DirectoryTable,
  record: { readonly id: string | number; readonly slug: string },
  error: string,
): void {
  ctx.log.warn(
    { resource, recordId: String(record.id), slug: record.slug, platformError: error },
    'directory record read answered no record (an error, or a body that is none); read again next run',
  );
}

/**
 * A record missing from both listings is read once more by its slug before it is called removed:
 * one that changed `active` between the two listings of a run appears in neither, yet still exists.
 * What the single read finds is stored (and so seen), or quarantined and kept when it fails its
 * schema; the rest is left for marking.
 *
 * A read answered `200 {"error": …}`, or 200 with no record at all (a login page), is neither: not
 * the record, and not the spec's not-found (a 404, spec 7), so nothing says the record is gone. It
 * is kept, as seen, without a quarantine row (there is no record to keep), and the next run asks
 * again. Removal waits for a clear not-found: an error text may mean anything (an overloaded
 * platform answering 200), and a record marked removed on it would be taken for deleted
 * downstream, while one kept a run longer only waits. Each is logged with the platform's text and
 * counted as `unconfirmed`, so that a platform which always answers so is noticed. So is a read
 * that failed for its record alone (a 5xx past its retries, a 400): no not-found either.
 *
 * Reads not made, the single read being taken for down (`SingleReads`), leave their records
 * unmarked: the caller then fails the run before anything is marked removed.
 */
async function confirmUnlisted<T extends { id: string | number }>(
  ctx: PullContext,
  tableName: DirectoryTable,
  startedAt: Date,
  counts: RunCounts,
  singleReads: SingleReads<T>,
  store: (found: T[]) => Promise<unknown>,
): Promise<void> {
  const candidates = await unlistedSince(ctx.db.knex, ctx.db, tableName, startedAt);
  const reads = await mapBounded(candidates, ctx.detailConcurrency, async (c) => ({
    id: String(c.id),
    slug: c.slug,
    read: await singleReads.read(c),
  }));
  const found: T[] = [];
  const rejected: RejectedRecord[] = [];
  const kept: string[] = [];
  const unconfirmed: string[] = [];
  for (const { id, slug, read } of reads) {
    if (read === undefined || read === 'skipped') continue;
    if ('record' in read) found.push(read.record);
    else if ('rejected' in read) {
      rejected.push(read.rejected);
      kept.push(id);
    } else {
      unconfirmed.push(id);
      warnFailedRead(ctx, tableName, { id, slug }, read.failed);
    }
  }
  await quarantineListed(ctx, tableName, rejected, counts, kept);
  if (unconfirmed.length > 0) {
    await markListed(ctx.db.knex, ctx.db, tableName, unconfirmed);
    addCount(counts, 'unconfirmed', unconfirmed.length);
  }
  if (found.length === 0) return;
  await store(found);
  addCount(counts, 'confirmed', found.length);
}
