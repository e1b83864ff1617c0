import { JOB } from '../jobs/jobNames.js';
import { type Fence, NO_FENCE } from '../jobs/lease.js';
import type { RunCounts } from '../jobs/runCounts.js';
import type { PullContext } from './context.js';
import { readCheckpoint, writeCheckpoint } from './syncStateSql.js';
import { advanceWatermark, EMPTY_CHECKPOINT, planIncrementalWalk } from './walkPlan.js';
import { walkReviewFeed } from './walkReviewFeed.js';

/**
 * The incremental sync: resumes an unfinished walk, or walks from the newest review down to the
 * watermark minus the overlap. Only a walk that reaches its end moves the watermark. An
 * unchanged feed costs one request (one page with has_more false).
 */
export async function syncReviews(
  ctx: PullContext,
  counts: RunCounts,
  signal?: AbortSignal,
  fence: Fence = NO_FENCE,
): Promise<void> {
  const { db, metrics } = ctx;
  const state = await readCheckpoint(db.knex, db, JOB.reviews);
  const plan = planIncrementalWalk(state, ctx.overlapMs);
  // Kept with the checkpoint, so a resumed walk is capped by when it first began.
  const walkStartedAt = (plan.resumed ? state.walkStartedAt : null) ?? new Date();
  let watermark = state.watermark;
  await walkReviewFeed(
    ctx,
    {
      job: JOB.reviews,
      plan,
      state,
      walkStartedAt,
      fence,
      complete: async (trx, walkNewest) => {
        watermark = advanceWatermark(state.watermark, walkNewest, walkStartedAt);
        await writeCheckpoint(trx, db, JOB.reviews, { ...EMPTY_CHECKPOINT, watermark });
      },
    },
    counts,
    signal,
  );
  if (watermark !== null) metrics?.newestReview.set(watermark.getTime() / 1000);
  metrics?.lastCompleteWalk.set({ sync_job: JOB.reviews }, Date.now() / 1000);
}
