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

/**
 * A one-line description of any thrown value, for CLI output and `sync_runs.error`. A failed
 * statement is described by the database's own message (kept by db/connect.ts), not by its SQL.
 */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const fromDatabase = (error as { databaseMessage?: unknown }).databaseMessage;
  if (typeof fromDatabase === 'string') return `database: ${fromDatabase.split('\n')[0]}`;
  return error.message.split('\n')[0] ?? error.name;
}
