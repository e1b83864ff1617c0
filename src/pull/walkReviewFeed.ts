import type { Knex } from 'knex';
import type { Fence } from '../jobs/lease.js';
import { addCount, type RunCounts } from '../jobs/runCounts.js';
import { quarantineRecords } from '../mirror/quarantineSql.js';
import { toReviewRow } from '../mirror/reviewRow.js';
import { upsertReviews } from '../mirror/reviewsSql.js';
import { ApiRequestError } from '../partner-api/errors.js';
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
 * Walks the review feed per `walk.plan` to its end. Every page is upserted in one statement, in
 * one transaction with the checkpoint that follows it, so a process killed anywhere resumes
 * exactly after the last stored page. The next page is fetched while this one is written.
 * Returns the newest created_at the whole walk saw.
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
  for (;;) {
    let pagesThisTry = 0;
    try {
      for await (const page of api.reviews.pages(walk.plan.since, cursor, signal)) {
        pagesThisTry++;
        newest = newestCreatedAt(newest, page.items);
        const until = walk.backfill?.until?.getTime();
        const inRange =
          until === undefined ? page.items : page.items.filter((r) => Date.parse(r.created_at) <= until);
        if (inRange.length < page.items.length)
          addCount(counts, 'after_until', page.items.length - inRange.length);
        const rows = inRange.map((r) => toReviewRow(r, page.receivedAt));
        const walkNewest = newest;
        const written = await db.knex.transaction(async (trx) => {
          // Rows and checkpoint are one transaction, so a server crash can only lose both together
          // (the walk then re-reads those pages): no need to wait for the WAL flush of every page.
          if (db.backend === 'postgres') await trx.raw('set local synchronous_commit = off');
          await walk.fence(trx);
          const result = await upsertReviews(trx, db, rows, 'feed');
          const quarantined = await quarantineRecords(trx, db, page.rejected ?? [], 'feed');
          if (page.nextCursor === null) await walk.complete(trx, walkNewest);
          else if (walk.backfill === undefined)
            await writeCheckpoint(trx, db, walk.job, {
              watermark: walk.state.watermark,
              cursor: page.nextCursor,
              walkSince: walk.plan.since,
              walkNewest,
              walkStartedAt: walk.walkStartedAt,
            });
          return { ...result, quarantined };
        });
        for (const r of page.rejected ?? []) {
          const id = (r.raw as { id?: unknown } | null)?.id;
          log.warn(
            { job: walk.job, reviewId: typeof id === 'string' ? id : null, reason: r.reason },
            'review quarantined',
          );
        }
        if (page.rejected?.length) addCount(counts, 'quarantined', page.rejected.length);
        metrics?.reviewsQuarantined.inc(written.quarantined);
        addCount(counts, 'pages');
        addCount(counts, 'fetched', page.items.length);
        addCount(counts, 'inserted', written.inserted);
        addCount(counts, 'updated', written.updated);
        metrics?.reviewsUpserted.inc({ source: 'feed', outcome: 'inserted' }, written.inserted);
        metrics?.reviewsUpserted.inc({ source: 'feed', outcome: 'updated' }, written.updated);
        signal?.throwIfAborted();
      }
      return newest;
    } catch (error) {
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
