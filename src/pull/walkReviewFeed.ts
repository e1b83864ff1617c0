import type { Knex } from 'knex';
import { isUniqueViolation } from '../db/dataError.js';
import type { Fence } from '../jobs/lease.js';
import { addCount, type RunCounts } from '../jobs/runCounts.js';
import { quarantineRecords } from '../mirror/quarantineSql.js';
import { type ReviewRow, toReviewRow } from '../mirror/reviewRow.js';
import { copyNewReviews, type UpsertCounts, upsertReviews } from '../mirror/reviewsSql.js';
import { ApiRequestError } from '../partner-api/errors.js';
import type { RejectedRecord } from '../partner-api/validRecords.js';
import type { PullContext } from './context.js';
import { writeCheckpoint } from './syncStateSql.js';
import { newestCreatedAt, type WalkCheckpoint, type WalkPlan } from './walkPlan.js';

export interface FeedWalk {
  readonly job: string;
  readonly plan: WalkPlan;
  /** The checkpoint row as read at the start; its watermark is carried through every page. */
  readonly state: WalkCheckpoint;
  readonly walkStartedAt: Date;
  /** Runs in the transaction of the last page: moves the watermark, marks removals, clears the walk. */
  readonly complete: (trx: Knex.Transaction, walkNewest: Date | null) => Promise<void>;
  /** Checked in every page's transaction: a replica that lost the job's lease writes nothing more. */
  readonly fence: Fence;
  /**
   * A backfill keeps no checkpoint (a stopped one is run again whole), and reviews created after
   * its `until` are read past (the feed has no upper bound) but not written.
   */
  readonly backfill?: { readonly until: Date | undefined };
}

/** A write covers this many fetched reviews at most, and waits for more pages this long at most. */
const WRITE_BATCH_ROWS = 1_000;
const WRITE_BATCH_MS = 1_000;
/**
 * Groups written at once on a PostgreSQL server: while the server runs one statement the client
 * encodes and sends the next (one writer: 47,000 rows/s, two: 62,000–93,000; docs/benchmarks.md).
 * The embedded database has one connection, so there a group waits its turn.
 */
const SERVER_WRITE_DEPTH = 2;

/** Fetched pages not yet written: their rows, and the checkpoint that follows the last of them. */
interface PendingWrite {
  rows: ReviewRow[];
  rejected: RejectedRecord[];
  pages: number;
  fetched: number;
  /** The last page's next cursor: null when that page ended the walk. */
  nextCursor: string | null;
  walkNewest: Date | null;
  readonly startedAt: number;
}

const emptyWrite = (): PendingWrite => ({
  rows: [],
  rejected: [],
  pages: 0,
  fetched: 0,
  nextCursor: null,
  walkNewest: null,
  startedAt: Date.now(),
});

/**
 * Walks the review feed per `walk.plan` to its end. Pages are written together, up to a thousand
 * reviews or a second's worth, each group in one statement and one transaction with the
 * checkpoint that follows its last page: a process killed anywhere resumes exactly after the last
 * stored group, re-reading at most that many pages. Groups are written while the next one is
 * fetched, two at once on a server: their rows may commit in either order (the upsert is
 * idempotent), but a group's checkpoint commits only after the group before it has, and not at all
 * if that one failed, so a checkpoint never passes an unwritten group. Returns the newest
 * created_at the whole walk saw.
 */
export async function walkReviewFeed(
  ctx: PullContext,
  walk: FeedWalk,
  counts: RunCounts,
  signal?: AbortSignal,
): Promise<Date | null> {
  const { db, api, log, metrics } = ctx;
  let cursor = walk.plan.cursor;
  let newest = walk.plan.newest;
  if (walk.plan.resumed) addCount(counts, 'resumed');

  const writeDepth = db.backend === 'postgres' ? SERVER_WRITE_DEPTH : 1;
  // Whether the next group is written by COPY: on a server, once a group stored only new reviews,
  // as in a backfill; after a group that met stored ones, the upsert again.
  let copyNext = false;
  const writeGroup = async (
    batch: PendingWrite,
    previous: Promise<void> | undefined,
    byCopy: boolean,
  ): Promise<UpsertCounts & { quarantined: number }> =>
    db.knex.transaction(async (trx) => {
      // Rows and checkpoint are one transaction, so a server crash can only lose both together
      // (the walk then re-reads those pages): no need to wait for the WAL flush of every group.
      if (db.backend === 'postgres') await trx.raw('set local synchronous_commit = off');
      await walk.fence(trx);
      const result = byCopy
        ? { inserted: await copyNewReviews(trx, db, batch.rows), updated: 0 }
        : await upsertReviews(trx, db, batch.rows, 'feed');
      const quarantined = await quarantineRecords(trx, db, batch.rejected, 'feed');
      // Rejects when the group before failed: this one then rolls back with it.
      await previous;
      if (batch.nextCursor === null) await walk.complete(trx, batch.walkNewest);
      else if (walk.backfill === undefined)
        await writeCheckpoint(trx, db, walk.job, {
          watermark: walk.state.watermark,
          cursor: batch.nextCursor,
          walkSince: walk.plan.since,
          walkNewest: batch.walkNewest,
          walkStartedAt: walk.walkStartedAt,
        });
      return { ...result, quarantined };
    });
  const write = async (batch: PendingWrite, previous: Promise<void> | undefined): Promise<void> => {
    const byCopy = copyNext && db.backend === 'postgres';
    let written: UpsertCounts & { quarantined: number };
    try {
      written = await writeGroup(batch, previous, byCopy);
    } catch (error) {
      if (!byCopy || !isUniqueViolation(error)) throw error;
      // A review of the group is stored already (the feed shifted between pages, a webhook landed
      // it): the group was rolled back whole, and the upsert writes it instead.
      log.debug({ job: walk.job, reviews: batch.rows.length }, 'group met stored reviews; upserting it');
      written = await writeGroup(batch, previous, false);
    }
    copyNext = written.updated === 0 && written.inserted > 0;
    if (batch.rejected.length) addCount(counts, 'quarantined', batch.rejected.length);
    metrics?.reviewsQuarantined.inc(written.quarantined);
    addCount(counts, 'pages', batch.pages);
    addCount(counts, 'fetched', batch.fetched);
    addCount(counts, 'inserted', written.inserted);
    addCount(counts, 'updated', written.updated);
    metrics?.reviewsUpserted.inc({ source: 'feed', outcome: 'inserted' }, written.inserted);
    metrics?.reviewsUpserted.inc({ source: 'feed', outcome: 'updated' }, written.updated);
  };

  for (;;) {
    let pagesThisTry = 0;
    // At most `writeDepth` groups are being written while the next one fills: memory stays bounded.
    const writing: Array<Promise<void>> = [];
    let pending = emptyWrite();
    const startWrite = async () => {
      if (writing.length >= writeDepth) await writing.shift();
      const batch = pending;
      pending = emptyWrite();
      const started = write(batch, writing.at(-1));
      // Observed here, thrown when it is awaited in turn: never an unhandled rejection.
      started.catch(() => {});
      writing.push(started);
    };
    try {
      for await (const page of api.reviews.pages(walk.plan.since, cursor, signal)) {
        pagesThisTry++;
        newest = newestCreatedAt(newest, page.items);
        const until = walk.backfill?.until?.getTime();
        const inRange =
          until === undefined ? page.items : page.items.filter((r) => Date.parse(r.created_at) <= until);
        if (inRange.length < page.items.length) {
          addCount(counts, 'after_until', page.items.length - inRange.length);
        }
        for (const r of inRange) pending.rows.push(toReviewRow(r, page.receivedAt));
        for (const r of page.rejected ?? []) {
          pending.rejected.push(r);
          const id = (r.raw as { id?: unknown } | null)?.id;
          log.warn(
            { job: walk.job, reviewId: typeof id === 'string' ? id : null, reason: r.reason },
            'review quarantined',
          );
        }
        pending.pages++;
        pending.fetched += page.items.length;
        pending.nextCursor = page.nextCursor;
        pending.walkNewest = newest;
        const full =
          pending.rows.length >= WRITE_BATCH_ROWS || Date.now() - pending.startedAt >= WRITE_BATCH_MS;
        // Stopping: what was fetched is written first, so the next run does not read it again.
        if (page.nextCursor === null || full || signal?.aborted) await startWrite();
        signal?.throwIfAborted();
      }
      for (const started of writing) await started;
      return newest;
    } catch (error) {
      await Promise.allSettled(writing);
      // A checkpointed cursor the platform no longer accepts (expired, or the platform was
      // reset): restart the same walk from its newest page, keeping its `since`.
      const staleCursor =
        error instanceof ApiRequestError &&
        pagesThisTry === 0 &&
        cursor !== null &&
        cursor === walk.plan.cursor;
      if (!staleCursor) throw error;
      log.warn({ job: walk.job, status: error.status }, 'checkpointed cursor refused; restarting the walk');
      cursor = null;
    }
  }
}
