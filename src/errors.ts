/**
 * The error taxonomy: an error is either worth retrying (the platform or the network may recover)
 * or fatal (retrying cannot help: bad key, bad request, bad config). The cause is always kept.
 */
export class RetryableError extends Error {
  override readonly name: string = 'RetryableError';
}

export class FatalError extends Error {
  override readonly name: string = 'FatalError';
}

/** A one-line description of any thrown value, for CLI output and `sync_runs.error`. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return error.message.split('\n')[0] ?? error.name;
  return String(error);
}
