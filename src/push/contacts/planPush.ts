import type { UnavailableStreak } from './unavailableStreak.js';

/** What the mirror knows of a contact it pushed before. */
export interface StoredContact {
  readonly hash: string;
  /** Whether the last push of that hash reached the platform. */
  readonly sent: boolean;
  /** Pushes in a row of that hash the platform failed without refusing it. */
  readonly streak?: UnavailableStreak | undefined;
}

export type PushOperation = 'create' | 'update' | 'retry' | 'unchanged';

/**
 * Whether a contact of the file is sent: never pushed (create), changed since the last push
 * (update), pushed but not accepted last time (retry), or unchanged (no request). `full` re-sends
 * every valid contact, for a deliberate resync.
 */
export function planPush(
  stored: StoredContact | undefined,
  hash: string,
  options: { full: boolean },
): PushOperation {
  if (stored === undefined) return 'create';
  if (stored.hash !== hash) return 'update';
  if (!stored.sent) return 'retry';
  return options.full ? 'update' : 'unchanged';
}
