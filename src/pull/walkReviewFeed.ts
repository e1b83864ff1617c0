import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import type { Knex } from 'knex';
import { isUniqueViolation } from '../db/dataError.js';
import type { Fence } from '../jobs/lease.js';
import { addCount, type RunCounts } from '../jobs/runCounts.js';
import { quarantineRecords, rejectedRecordId } from '../mirror/quarantineSql.js';
import { type ReviewRow, toReviewRow } from '../mirror/reviewRow.js';
import { copyNewReviews, markSeenByFeed, type UpsertCounts, upsertReviews } from '../mirror/reviewsSql.js';
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

/**
 * An upserted group covers this many fetched reviews at most; every group waits for more pages
 * this long at most, so a slow walk still checkpoints every second.
 */
const WRITE_BATCH_ROWS = 1_000;
const WRITE_BATCH_MS = 1_000;
/**
 * A group written by COPY streams its pages to the server as they arrive and holds none of them,
 * so its size costs no memory: larger groups mean fewer transactions (5,000 reviews: 12–15% faster
 * backfills than 1,000; docs/benchmarks.md), and a kill or a refused COPY re-reads at most one.
 */
const COPY_BATCH_ROWS = 5_000;
/**
 * Groups written at once on a PostgreSQL server: while the server runs one statement the client
 * encodes and sends the next (one writer: 47,000 rows/s, two: 62,000–93,000; docs/benchmarks.md).
 * A group written by COPY counts from its first page on, since it is being written from then.
 * The embedded database has one connection, so there a group waits its turn.
 */
const SERVER_WRITE_DEPTH = 2;
/** Pages a COPY group takes ahead of the server before the walk waits for it. */
const COPY_PAGES_AHEAD = 2;

const FEED_QUARANTINE = { table: 'review_quarantine', source: 'feed' } as const;

/** Fetched pages not yet written: their rows, and the checkpoint that follows the last of them. */
interface PendingWrite {
  /** The rows of an upserted group. */
  readonly rows: ReviewRow[];
  /** A COPY group's rows, page by page, on their way to the server while the walk fetches more. */
  readonly stream: PassThrough | undefined;
  /** The cursor of the group's first page: where the walk reads again if its COPY is refused. */
  readonly startCursor: string | null;
  size: number;
  rejected: RejectedRecord[];
  pages: number;
  fetched: number;
  /** The last page's next cursor: null when that page ended the walk. */
  nextCursor: string | null;
  walkNewest: Date | null;
  readonly startedAt: number;
}

function newGroup(startCursor: string | null, byCopy: boolean): PendingWrite {
  let stream: PassThrough | undefined;
  if (byCopy) {
    stream = new PassThrough({ objectMode: true, highWaterMark: COPY_PAGES_AHEAD });
    // Its failures surface through the group's write; it is only ever destroyed without an error.
    stream.on('error', () => {});
  }
  return {
    rows: [],
    stream,
    startCursor,
    size: 0,
    rejected: [],
    pages: 0,
    fetched: 0,
    nextCursor: null,
    walkNewest: null,
    startedAt: Date.now(),
  };
}

/** A group's write that failed first in a try of the walk, and whether COPY refused it. */
interface FirstFailure {
  readonly index: number;
  readonly startCursor: string | null;
  readonly storedReview: boolean;
}

/**
 * Walks the review feed per `walk.plan` to its end. Pages are written together, each group in one
 * transaction with the checkpoint that follows its last page: a process killed anywhere resumes
 * exactly after the last stored group, re-reading at most that many pages. Groups are written
 * while the next one is fetched, two at once on a server: their rows may commit in either order
 * (the upsert is idempotent), but a group's checkpoint commits only after the group before it has,
 * and not at all if that one failed, so a checkpoint never passes an unwritten group.
 *
 * On a server, once a group has stored only new reviews (as in a backfill), the next groups are
 * inserted by COPY, streamed page by page. A COPY that meets a stored review rolls back, and the
 * walk reads its pages again from the group's first one, upserting them. Returns the newest
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
  // Whether the next group is written by COPY: once a group stored only new reviews; after a group
  // that met stored ones, the upsert again.
  let copyNext = false;
  const writeGroup = async (
    batch: PendingWrite,
    previous: Promise<void> | undefined,
  ): Promise<UpsertCounts & { quarantined: number }> =>
    db.knex.transaction(async (trx) => {
      // Rows and checkpoint are one transaction, so a server crash can only lose both together
      // (the walk then re-reads those pages): no need to wait for the WAL flush of every group.
      if (db.backend === 'postgres') await trx.raw('set local synchronous_commit = off');
      const result = batch.stream
        ? { inserted: await copyNewReviews(trx, db, batch.stream), updated: 0 }
        : await upsertReviews(trx, db, batch.rows, 'feed');
      const quarantined = await quarantineRecords(trx, db, batch.rejected, FEED_QUARANTINE);
      // A stored review sent invalid still exists: a reconcile must not take it for removed.
      await markSeenByFeed(
        trx,
        db,
        batch.rejected.flatMap((r) => rejectedRecordId(r.raw) ?? []),
      );
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
      // Last (lease.ts): a reconcile's completion marks removals across the table, which must not
      // hold the lease's renewal back; a lost lease still rolls all of it back.
      await walk.fence(trx);
      return { ...result, quarantined };
    });

  for (;;) {
    let pagesThisTry = 0;
    // At most `writeDepth` groups are being written while an upserted one fills: memory stays bounded.
    const writing: Array<Promise<void>> = [];
    let pending: PendingWrite | undefined;
    let groups = 0;
    let firstFailure: FirstFailure | undefined;
    const write = async (batch: PendingWrite, previous: Promise<void> | undefined, index: number) => {
      let written: UpsertCounts & { quarantined: number };
      try {
        written = await writeGroup(batch, previous);
      } catch (error) {
        // Nothing reads its pages any more: the walk must not wait for room in it.
        batch.stream?.destroy();
        if (firstFailure === undefined || index < firstFailure.index) {
          const storedReview = batch.stream !== undefined && isUniqueViolation(error);
          firstFailure = { index, startCursor: batch.startCursor, storedReview };
        }
        throw error;
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
    const launch = async (batch: PendingWrite): Promise<void> => {
      if (writing.length >= writeDepth) await writing.shift();
      const started = write(batch, writing.at(-1), groups++);
      // Observed here, thrown when it is awaited in turn: never an unhandled rejection.
      started.catch(() => {});
      writing.push(started);
    };
    // The write of the COPY group being filled, if any.
    let streaming: Promise<void> | undefined;
    // The cursor the next page is read with: a group starting with that page starts there.
    let pageCursor = cursor;
    let copyDeadline: NodeJS.Timeout | undefined;
    // Ends the COPY group being filled, if any: it commits the pages it took, with their checkpoint.
    const endCopyGroup = () => {
      const group = pending;
      if (group?.stream === undefined) return;
      pending = undefined;
      clearTimeout(copyDeadline);
      group.stream.end();
    };
    try {
      for await (const page of api.reviews.pages(walk.plan.since, cursor, signal, {
        checkpointed: walk.backfill === undefined,
      })) {
        pagesThisTry++;
        if (pending === undefined) {
          const opened = newGroup(pageCursor, copyNext && db.backend === 'postgres');
          pending = opened;
          // A COPY group is written from its first page on; an upserted one once it is full.
          if (opened.stream) {
            await launch(opened);
            streaming = writing.at(-1);
            // Its transaction is open meanwhile: a page slow to come (the platform retried) must
            // not hold it, so it ends after a second whether or not another page came.
            copyDeadline = setTimeout(() => {
              if (pending === opened) endCopyGroup();
            }, WRITE_BATCH_MS).unref();
          }
        }
        const group = pending;
        newest = newestCreatedAt(newest, page.items);
        const until = walk.backfill?.until?.getTime();
        const inRange =
          until === undefined ? page.items : page.items.filter((r) => Date.parse(r.created_at) <= until);
        if (inRange.length < page.items.length) {
          addCount(counts, 'after_until', page.items.length - inRange.length);
        }
        const rows = inRange.map((r) => toReviewRow(r, page.receivedAt));
        // Queued at once even when the stream is full, so the group holds every page it counts.
        if (group.stream) group.stream.write(rows);
        else group.rows.push(...rows);
        group.size += rows.length;
        for (const r of page.rejected ?? []) {
          group.rejected.push(r);
          log.warn(
            { job: walk.job, reviewId: rejectedRecordId(r.raw), reason: r.reason },
            'review quarantined',
          );
        }
        group.pages++;
        group.fetched += page.items.length;
        group.nextCursor = page.nextCursor;
        group.walkNewest = newest;
        pageCursor = page.nextCursor;
        const full =
          group.size >= (group.stream ? COPY_BATCH_ROWS : WRITE_BATCH_ROWS) ||
          Date.now() - group.startedAt >= WRITE_BATCH_MS;
        // Stopping: what was fetched is written first, so the next run does not read it again.
        if (page.nextCursor === null || full || signal?.aborted) {
          if (group.stream) endCopyGroup();
          else {
            pending = undefined;
            await launch(group);
          }
        } else if (group.stream?.writableNeedDrain) {
          // The server is behind: wait for it (or for the group's failure) before fetching more.
          await Promise.race([once(group.stream, 'drain'), streaming]);
        }
        signal?.throwIfAborted();
        // A group failed: stop reading pages; its failure is thrown below.
        if (firstFailure !== undefined) break;
      }
      for (const started of writing) await started;
      return newest;
    } catch (error) {
      // A COPY group cut short still commits what it took.
      endCopyGroup();
      // So does an upserted one when reading failed (a page refused, the platform gone): its pages
      // came whole, with a cursor to go on from, and a walk that fails at the same page on every
      // run would otherwise never store the pages before it. After a failed write it would only
      // roll back with that one, so it is dropped.
      if (pending !== undefined && firstFailure === undefined) {
        const group = pending;
        pending = undefined;
        // Its failure is logged, the read's error being what the run reports.
        await launch(group).catch((writeError: unknown) =>
          log.warn(
            { job: walk.job, err: writeError },
            'pages read before the failed fetch could not be stored',
          ),
        );
      }
      await Promise.allSettled(writing);
      if (firstFailure?.storedReview) {
        // A review of the group is stored already (the feed shifted between pages, a webhook landed
        // it): the group rolled back whole, and its pages are read again and upserted.
        log.debug({ job: walk.job }, 'a group met stored reviews; reading it again to upsert it');
        cursor = firstFailure.startCursor;
        copyNext = false;
        continue;
      }
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
