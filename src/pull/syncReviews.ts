import { JOB } from '../jobs/jobNames.js';
import { type Fence, NO_FENCE } from '../jobs/lease.js';
import { addCount, type RunCounts } from '../jobs/runCounts.js';
import { ApiProtocolError, ApiSchemaError } from '../partner-api/errors.js';
import { backfillReviews } from './backfillReviews.js';
import type { PullContext } from './context.js';
import { readCheckpoint, writeCheckpoint } from './syncStateSql.js';
import {
  advanceWatermark,
  EMPTY_CHECKPOINT,
  headPassSince,
  planIncrementalWalk,
  type WalkCheckpoint,
} from './walkPlan.js';
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
  try {
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
  } catch (error) {
    if (plan.resumed && refusedPage(error)) await readAboveStuckWalk(ctx, state, counts, signal, fence);
    throw error;
  }
  if (watermark !== null) metrics?.newestReview.set(watermark.getTime() / 1000);
  metrics?.lastCompleteWalk.set({ sync_job: JOB.reviews }, Date.now() / 1000);
}

/**
 * A page this client refuses: the platform broke the protocol on it, or sent it mostly invalid.
 * Served the same way to the next run, it would stop the walk at the same cursor every time.
 */
const refusedPage = (error: unknown): boolean =>
  error instanceof ApiProtocolError || error instanceof ApiSchemaError;

/**
 * A resumed walk stuck on a page the client refuses keeps its checkpoint at that page, and every
 * run failed there before reading anything newer: reviews created since were never polled, only
 * webhooks brought them. So the feed above the stuck walk is read all the same, from the newest
 * review down to what that walk had seen first (headPassSince), writing reviews only: the stuck
 * walk keeps its checkpoint and the watermark, and completes them once its page is served. The
 * run still fails, with the stuck walk's error; this pass's own failure is only logged.
 */
async function readAboveStuckWalk(
  ctx: PullContext,
  state: WalkCheckpoint,
  counts: RunCounts,
  signal: AbortSignal | undefined,
  fence: Fence,
): Promise<void> {
  const since = headPassSince(state, ctx.overlapMs);
  if (since === undefined || signal?.aborted === true) return;
  addCount(counts, 'head_passes');
  try {
    // A backfill's walk: no checkpoint of its own, the watermark left alone.
    await backfillReviews(ctx, { since, until: undefined }, counts, signal, fence);
  } catch (error) {
    ctx.log.warn(
      { job: JOB.reviews, err: error },
      'the reviews newer than the stuck walk could not be read either',
    );
  }
}
