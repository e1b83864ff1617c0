import { readDatabaseNow } from '../db/clockSql.js';
import { JOB } from '../jobs/jobNames.js';
import { type Fence, NO_FENCE } from '../jobs/lease.js';
import { addCount, type RunCounts } from '../jobs/runCounts.js';
import {
  type DirectoryTable,
  markListed,
  markRemovedDirectory,
  readStoredProfessionals,
  unlistedSince,
  upsertLocations,
  upsertProfessionals,
} from '../mirror/directorySql.js';
import { quarantineRecords, rejectedRecordId } from '../mirror/quarantineSql.js';
import type { CheckedRecord } from '../partner-api/directoryPages.js';
import { ApiRequestError } from '../partner-api/errors.js';
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
  for (const active of BOTH) {
    for await (const page of api.locations.pages(active, null, signal)) {
      addCount(counts, 'pages');
      addCount(counts, 'fetched', await upsertLocations(db.knex, db, page.items));
      await quarantineListed(ctx, 'locations', page.rejected, counts);
    }
  }
  await confirmUnlisted(ctx, 'locations', startedAt, counts, {
    read: (slug) => ctx.api.locations.read(slug, signal),
    store: (found) => upsertLocations(db.knex, db, found),
  });
  addCount(counts, 'removed', await markRemovedFenced(ctx, 'locations', startedAt, fence));
  ctx.metrics?.lastCompleteWalk.set({ sync_job: JOB.locations }, Date.now() / 1000);
}

/**
 * Mirrors every professional, active and inactive, with `location_id` from single reads (at most
 * `detailConcurrency` at once) where the mirror lacks it or the listed record changed; `full`
 * re-reads every one. Removal as for locations.
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
      // A read answered with an error or no record instead: stored without it too, read next run.
      let failed = 0;
      await mapBounded(toRead, ctx.detailConcurrency, async (item) => {
        const read = await readIfSame(item.id, () => api.professionals.read(item.slug, signal));
        if (read === undefined) return;
        if ('record' in read) details.set(item.id, read.record);
        else if ('rejected' in read) rejectedDetails.push(read.rejected);
        else {
          failed++;
          warnFailedRead(ctx, 'professionals', item, read.failed);
        }
      });
      const missing = toRead.length - details.size - rejectedDetails.length - failed;
      if (missing > 0) log.info({ missing }, 'professionals renamed or gone since listed; read next run');
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
  await confirmUnlisted(ctx, 'professionals', startedAt, counts, {
    read: (slug) => ctx.api.professionals.read(slug, signal),
    store: (found) =>
      upsertProfessionals(
        db.knex,
        db,
        found.map((p) => ({ item: p, detail: p })),
      ),
  });
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
 * The single record by slug, or undefined when the slug no longer names the record with `id`
 * (renamed or deleted since the listing). One that fails its schema is taken as that record
 * unless the id it carries says otherwise; a read answered with an error comes back as such.
 */
async function readIfSame<T extends { id: string | number }>(
  id: string | number,
  read: () => Promise<CheckedRecord<T>>,
): Promise<CheckedRecord<T> | undefined> {
  try {
    const checked = await read();
    if ('record' in checked) return checked.record.id === id ? checked : undefined;
    if ('failed' in checked) return checked;
    const carried = rejectedRecordId(checked.rejected.raw);
    return carried === null || carried === String(id) ? checked : undefined;
  } catch (error) {
    if (error instanceof ApiRequestError && error.status === 404) return undefined;
    throw error;
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
 * counted as `unconfirmed`, so that a platform which always answers so is noticed.
 */
async function confirmUnlisted<T extends { id: string | number }>(
  ctx: PullContext,
  tableName: DirectoryTable,
  startedAt: Date,
  counts: RunCounts,
  io: { read: (slug: string) => Promise<CheckedRecord<T>>; store: (found: T[]) => Promise<unknown> },
): Promise<void> {
  const candidates = await unlistedSince(ctx.db.knex, ctx.db, tableName, startedAt);
  const reads = await mapBounded(candidates, ctx.detailConcurrency, async (c) => ({
    id: String(c.id),
    slug: c.slug,
    read: await readIfSame(c.id, () => io.read(c.slug)),
  }));
  const found: T[] = [];
  const rejected: RejectedRecord[] = [];
  const kept: string[] = [];
  const unconfirmed: string[] = [];
  for (const { id, slug, read } of reads) {
    if (read === undefined) continue;
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
  await io.store(found);
  addCount(counts, 'confirmed', found.length);
}
