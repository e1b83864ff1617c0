import { JOB } from '../jobs/jobNames.js';
import { type Fence, NO_FENCE } from '../jobs/lease.js';
import type { RunCounts } from '../jobs/runCounts.js';
import type { PullContext } from './context.js';
import { EMPTY_CHECKPOINT } from './walkPlan.js';
import { walkReviewFeed } from './walkReviewFeed.js';

/** The date range of a backfill: created after `since` and at or before `until`, each when given. */
export interface BackfillRange {
  readonly since: Date | undefined;
  readonly until: Date | undefined;
}

/**
 * `sync reviews --since T [--until T]`: re-reads a date range of the feed (after an incident, a
 * restore) through the same upsert, leaving the watermark and the incremental walk's checkpoint
 * alone. Nothing is marked removed: only a whole-feed reconcile can decide that.
 */
export async function backfillReviews(
  ctx: PullContext,
  range: BackfillRange,
  counts: RunCounts,
  signal?: AbortSignal,
  fence: Fence = NO_FENCE,
): Promise<void> {
  await walkReviewFeed(
    ctx,
    {
      job: JOB.backfill,
      plan: { since: range.since ?? null, cursor: null, newest: null, resumed: false },
      state: EMPTY_CHECKPOINT,
      walkStartedAt: new Date(),
      fence,
      backfill: { until: range.until },
      complete: async () => {},
    },
    counts,
    signal,
  );
}
