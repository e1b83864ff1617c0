import type { UnavailableStreak } from './unavailableStreak.js';

/** What the mirror knows of a contact it pushed before. */
export interface StoredContact {
  readonly hash: string;
  /** Whether the last push of that hash reached the platform. */
  readonly sent: boolean;
  /** Pushes in a row of that hash the platform failed without refusing it. */
  readonly streak?: UnavailableStreak | undefined;
  /** Failed for good on an earlier push of that hash (see unavailableStreak.isGivenUp). */
  readonly givenUp?: boolean | undefined;
  /** Why its last push failed. */
  readonly error?: string | null | undefined;
  /**
   * The name and professional it was last recorded with (pending or sent), to send one emptied
   * since cleared; while a clear of one is not yet taken, the value the platform may still hold.
   */
  readonly name?: string | null | undefined;
  readonly professionalId?: string | null | undefined;
}

/**
 * `given_up`: failed for good on an earlier push (see unavailableStreak) and unchanged since: not
 * sent, and reported failed again.
 */
export type PushOperation = 'create' | 'update' | 'retry' | 'unchanged' | 'given_up';

/**
 * Whether a contact of the file is sent: never pushed (create), changed since the last push
 * (update), pushed but not accepted last time (retry), or unchanged (no request). A contact given
 * up on an earlier push is not sent again for the same content (given_up): re-pushed with the
 * export it was given up in (kept for its other contacts), it would begin a new streak, failed as
 * unavailable, and hold the export for as many pushes again. `full` re-sends every valid contact,
 * for a deliberate resync, given up or not.
 */
export function planPush(
  stored: StoredContact | undefined,
  hash: string,
  options: { full: boolean },
): PushOperation {
  if (stored === undefined) return 'create';
  if (stored.hash !== hash) return 'update';
  if (!stored.sent) return stored.givenUp === true && !options.full ? 'given_up' : 'retry';
  return options.full ? 'update' : 'unchanged';
}
