import type { Db } from '../db/connect.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { PartnerApi } from '../partner-api/client.js';

/** The gauges and counters the pull jobs feed; absent for a one-shot CLI run. */
export type PullMetrics = Pick<
  Metrics,
  | 'reviewsUpserted'
  | 'reviewsQuarantined'
  | 'directoryQuarantined'
  | 'reviewsRemoved'
  | 'newestReview'
  | 'lastCompleteWalk'
>;

/** Everything a pull job needs, handed in by whoever wires it (the CLI or the daemon). */
export interface PullContext {
  readonly db: Db;
  readonly api: PartnerApi;
  readonly log: Logger;
  readonly metrics?: PullMetrics | undefined;
  /** How far behind the watermark an incremental walk starts reading. */
  readonly overlapMs: number;
  /** Single-record reads in flight at once while mirroring professionals. */
  readonly detailConcurrency: number;
}
