import { readDatabaseNow } from '../db/clockSql.js';
import { JOB } from '../jobs/jobNames.js';
import { type Fence, NO_FENCE } from '../jobs/lease.js';
import { addCount, type RunCounts } from '../jobs/runCounts.js';
import { markRemovedReviews } from '../mirror/reviewsSql.js';
import type { PullContext } from './context.js';
import { readCheckpoint, writeCheckpoint } from './syncStateSql.js';
import { advanceWatermark, EMPTY_CHECKPOINT, planFullWalk } from './walkPlan.js';
import { walkReviewFeed } from './walkReviewFeed.js';

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
  fence: Fence = NO_FENCE,
): Promise<void> {
  const { db, metrics } = ctx;
  const state = await readCheckpoint(db.knex, db, JOB.reconcile);
  const plan = planFullWalk(state);
  // Stamped by the database, the clock that also stamps feed_seen_at and first_seen_at.
  const walkStartedAt = plan.resumed ? state.walkStartedAt! : await readDatabaseNow(db.knex);
  // Counted once the walk returns, its last transaction committed: the lease check comes after
  // the marking in that transaction, and a lost lease rolls the marking back.
  let removed = 0;
  await walkReviewFeed(
    ctx,
    {
      job: JOB.reconcile,
      plan,
      state,
      walkStartedAt,
      fence,
      complete: async (trx, walkNewest) => {
        removed = await markRemovedReviews(trx, db, walkStartedAt);
        const watermark = advanceWatermark(state.watermark, walkNewest, walkStartedAt);
        await writeCheckpoint(trx, db, JOB.reconcile, { ...EMPTY_CHECKPOINT, watermark });
      },
    },
    counts,
    signal,
  );
  addCount(counts, 'removed', removed);
  metrics?.reviewsRemoved.inc(removed);
  metrics?.lastCompleteWalk.set({ sync_job: JOB.reconcile }, Date.now() / 1000);
}
