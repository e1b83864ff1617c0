/**
 * The decisions of an incremental walk of the newest-first review feed, kept pure.
 *
 * A walk reads from the newest review down to `since` (exclusive), following cursors. It is
 * checkpointed after every page (cursor, its `since`, the newest created_at it has seen), and
 * only a walk that reached the end moves the watermark, to the newest created_at it saw.
 * The next walk starts at watermark minus the overlap, which re-reads the boundary: ties on
 * created_at, reviews that arrive late with a past created_at, and clock skew.
 */

/** A job's row of `sync_state`, as far as walks are concerned. */
export interface WalkCheckpoint {
  /** Newest created_at known to be fully mirrored (every review at or before it, minus the overlap). */
  readonly watermark: Date | null;
  /** The unfinished walk's next cursor; null when no walk is in progress. */
  readonly cursor: string | null;
  readonly walkSince: Date | null;
  readonly walkNewest: Date | null;
  readonly walkStartedAt: Date | null;
}

export const EMPTY_CHECKPOINT: WalkCheckpoint = {
  watermark: null,
  cursor: null,
  walkSince: null,
  walkNewest: null,
  walkStartedAt: null,
};

export interface WalkPlan {
  /** Lower bound passed as `since` on every page of this walk; null reads the whole feed. */
  readonly since: Date | null;
  /** Where to start: a checkpointed cursor, or null for the newest page. */
  readonly cursor: string | null;
  /** Newest created_at already seen by this walk (a resumed walk keeps what its first part saw). */
  readonly newest: Date | null;
  readonly resumed: boolean;
}

/** Resume the unfinished walk if there is one; otherwise start a new one behind the watermark. */
export function planIncrementalWalk(state: WalkCheckpoint, overlapMs: number): WalkPlan {
  if (state.cursor !== null) {
    return { since: state.walkSince, cursor: state.cursor, newest: state.walkNewest, resumed: true };
  }
  const since = state.watermark === null ? null : new Date(state.watermark.getTime() - overlapMs);
  return { since, cursor: null, newest: null, resumed: false };
}

/**
 * Where a read of the feed above an unfinished walk that cannot go on (syncReviews) stops: the
 * newest review that walk saw (or, before it saw any, the watermark), minus the overlap.
 * Undefined when there is no such bound: a walk of the whole feed would meet the page the
 * unfinished walk is stuck on.
 */
export function headPassSince(state: WalkCheckpoint, overlapMs: number): Date | undefined {
  const above = state.walkNewest ?? state.watermark;
  return above === null ? undefined : new Date(above.getTime() - overlapMs);
}

/**
 * A reconcile reads everything; it resumes its own unfinished walk, but only one that knows when
 * it began (removals are decided against that time).
 */
export function planFullWalk(state: WalkCheckpoint): WalkPlan {
  if (state.cursor !== null && state.walkStartedAt !== null) {
    return { since: null, cursor: state.cursor, newest: state.walkNewest, resumed: true };
  }
  return { since: null, cursor: null, newest: null, resumed: false };
}

/**
 * The newest of `current` and the created_at of `items`, which passed isoTimestamp. Two such
 * timestamps in UTC (`Z`) of the same length have the same fields at the same places, so their
 * text order is their time order: only the page's newest of them is parsed, the rest compared as
 * text (parsing every one was 3% of a backfill's CPU; docs/benchmarks.md). Any other is parsed.
 */
export function newestCreatedAt(
  current: Date | null,
  items: ReadonlyArray<{ created_at: string }>,
): Date | null {
  let newest = current?.getTime() ?? Number.NEGATIVE_INFINITY;
  let newestUtc: string | undefined;
  for (const { created_at: at } of items) {
    if (at.endsWith('Z') && (newestUtc === undefined || at.length === newestUtc.length)) {
      if (newestUtc === undefined || at > newestUtc) newestUtc = at;
    } else {
      newest = Math.max(newest, Date.parse(at));
    }
  }
  if (newestUtc !== undefined) newest = Math.max(newest, Date.parse(newestUtc));
  return Number.isFinite(newest) ? new Date(newest) : null;
}

/**
 * The watermark after a completed walk: never moves backwards; an empty walk leaves it alone.
 * It never passes `walkStartedAt` either: a review dated in the future (a platform clock or data
 * error) would otherwise lift the watermark past every review still to come, and incremental
 * walks would read nothing new until it is reached. Reviews created after the walk started are
 * newer than its first page, so the next walk, from at most that time minus the overlap, sees them.
 */
export function advanceWatermark(
  watermark: Date | null,
  walkNewest: Date | null,
  walkStartedAt: Date,
): Date | null {
  if (walkNewest === null) return watermark;
  const capped = walkNewest.getTime() > walkStartedAt.getTime() ? walkStartedAt : walkNewest;
  if (watermark === null) return capped;
  return capped.getTime() > watermark.getTime() ? capped : watermark;
}
