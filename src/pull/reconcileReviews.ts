import { readDatabaseNow } from '../db/clockSql.js';
import { markRemovedReviews } from '../mirror/reviewsSql.js';
import { addCount, type PullContext, type RunCounts } from './context.js';
import { readCheckpoint, writeCheckpoint } from './syncStateSql.js';
import { advanceWatermark, EMPTY_CHECKPOINT, planFullWalk } from './walkPlan.js';
import { walkReviewFeed } from './walkReviewFeed.js';

export const RECONCILE_JOB = 'reviews:reconcile';

/**
 * The full reconcile (`sync reviews --full`, and daily): walks the whole feed, upserting every
 * page, and in the transaction of the last page marks removed every review the walk did not
 * see. Resumable like the incremental walk (its own checkpoint row, keeping the time the walk
 * began); a walk that does not reach the end marks nothing.
 */
export async function reconcileReviews(
  ctx: PullContext,
  counts: RunCounts,
  signal?: AbortSignal,
): Promise<void> {
  const { db, metrics } = ctx;
  const state = await readCheckpoint(db.knex, db, RECONCILE_JOB);
  const plan = planFullWalk(state);
  // Stamped by the database, the clock that also stamps feed_seen_at and first_seen_at.
  const walkStartedAt = plan.resumed ? state.walkStartedAt! : await readDatabaseNow(db.knex);
  await walkReviewFeed(
    ctx,
    {
      job: RECONCILE_JOB,
      plan,
      state,
      walkStartedAt,
      complete: async (trx, walkNewest) => {
        const removed = await markRemovedReviews(trx, db, walkStartedAt);
        addCount(counts, 'removed', removed);
        metrics?.reviewsRemoved.inc(removed);
        const watermark = advanceWatermark(state.watermark, walkNewest, walkStartedAt);
        await writeCheckpoint(trx, db, RECONCILE_JOB, { ...EMPTY_CHECKPOINT, watermark });
      },
    },
    counts,
    signal,
  );
  counts.removed ??= 0;
  metrics?.lastCompleteWalk.set({ job: RECONCILE_JOB }, Date.now() / 1000);
}
