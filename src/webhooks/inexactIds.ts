import type { Logger } from '../log.js';
import type { WebhookWithInexactId } from '../partner-api/webhooksSchema.js';

/** What becomes of a listed webhook whose id cannot be named, and what the operator can do. */
export const INEXACT_ID_HANDLING =
  'never matched, recorded or deleted here; delete it by hand if it is not wanted (`review-mirror webhooks delete <its id as the platform shows it>`)';

/**
 * Warns of each listed webhook whose id cannot be named exactly (see WebhookWithInexactId), by
 * its place in the list and its URL (the texts it carries may echo a secret: not logged). Once
 * per `warned`, kept by a caller that lists again and again (the health job, every few minutes),
 * then at debug; without it, every time.
 */
export function warnInexactIds(
  log: Logger,
  inexact: readonly WebhookWithInexactId[],
  warned?: Set<string>,
): void {
  for (const w of inexact) {
    // By URL and id as read, not by position: the webhooks before an entry come and go.
    log[warnOnce(warned, `${w.url ?? ''}\n${w.idProblem}`)](
      { listPosition: w.position, url: w.url ?? null, idProblem: w.idProblem },
      `listed webhook whose id cannot be named exactly: ${INEXACT_ID_HANDLING}`,
    );
  }
}

/** `warn` the first time `key` is met in `warned`, `debug` after that; always `warn` without it. */
export function warnOnce(warned: Set<string> | undefined, key: string): 'warn' | 'debug' {
  if (warned?.has(key) === true) return 'debug';
  warned?.add(key);
  return 'warn';
}
