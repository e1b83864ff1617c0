import { setTimeout as sleep } from 'node:timers/promises';
import { nextRetryDelayMs } from '../partner-api/retryPolicy.js';
import { isDataError } from './dataError.js';

/** Waits between tries of a write (the platform client's backoff, shorter: a restart is seconds). */
const WRITE_BACKOFF = { baseDelayMs: 100, maxDelayMs: 2_000 } as const;

export interface WriteRetryOptions {
  /** Time from the first try after which the last failure is thrown. */
  readonly budgetMs: number;
  /** Aborted: the last failure is thrown instead of trying again (a shutdown). */
  readonly stop?: AbortSignal | undefined;
  readonly random?: () => number;
  /** Called before each wait, with the failure and the tries so far. */
  readonly onRetry: (error: unknown, tries: number) => void;
}

/**
 * Runs `write`, trying it again while the database fails it for a reason that is not in what it
 * writes (a restart, a failover, a dropped connection), for up to `budgetMs`. For outcomes the
 * platform has answered: dropped, their request would be sent again, to a person. A data error
 * (the values themselves refused) is thrown at once: it would fail every try the same way.
 */
export async function writeRetrying<T>(write: () => Promise<T>, options: WriteRetryOptions): Promise<T> {
  const startedAt = Date.now();
  const retry = { ...WRITE_BACKOFF, maxRetries: Number.POSITIVE_INFINITY, budgetMs: options.budgetMs };
  for (let tries = 1; ; tries++) {
    try {
      return await write();
    } catch (error) {
      const delayMs = nextRetryDelayMs(
        { retriesSoFar: tries - 1, elapsedMs: Date.now() - startedAt, retryAfterMs: undefined },
        retry,
        options.random ?? Math.random,
      );
      if (isDataError(error) || options.stop?.aborted || delayMs === undefined) throw error;
      options.onRetry(error, tries);
      await sleep(delayMs);
    }
  }
}
