import type { Db } from '../db/connect.js';
import { storableText } from '../db/storableText.js';
import { addCount, type RunCounts } from '../jobs/runCounts.js';
import type { Logger } from '../log.js';
import type { PartnerApi } from '../partner-api/client.js';
import { type ListedWebhook, splitListed } from '../partner-api/webhooksSchema.js';
import { warnInexactIds } from './inexactIds.js';
import type { SigningSecrets } from './secrets.js';
import {
  listStoredWebhooks,
  type MissRate,
  missRate,
  readWebhookMissRate,
  recordListedWebhooks,
} from './webhooksSql.js';

export type WebhookState = 'active' | 'inactive' | 'failing';
export const WEBHOOK_STATES: readonly WebhookState[] = ['active', 'inactive', 'failing'];

/** Inactive wins over failing: a disabled webhook's old error no longer matters. */
export function webhookState(w: {
  is_active?: boolean | null | undefined;
  last_error?: string | null;
}): WebhookState {
  if (w.is_active === false) return 'inactive';
  return w.last_error ? 'failing' : 'active';
}

export function countStates(
  webhooks: readonly Parameters<typeof webhookState>[0][],
): Record<WebhookState, number> {
  const counts: Record<WebhookState, number> = { active: 0, inactive: 0, failing: 0 };
  for (const w of webhooks) counts[webhookState(w)]++;
  return counts;
}

export interface HealthCheckDeps {
  readonly api: Pick<PartnerApi, 'webhooks'>;
  readonly db: Db;
  readonly secrets: SigningSecrets;
  readonly log: Logger;
  /** What was warned of about listed webhooks whose id cannot be named (see warnInexactIds). */
  readonly warnedInexact?: Set<string>;
}

/** What one health check saw: the platform's list, its webhooks by state, and the miss rate. */
export interface WebhookHealth {
  readonly listed: ListedWebhook[];
  readonly states: Record<WebhookState, number>;
  readonly miss: MissRate;
}

/**
 * The scheduled health poll: reads the platform's webhook list, records state and last_error of
 * each (but of those whose id cannot be named, which it warns of), refreshes the accepted secrets,
 * and returns what it saw with the miss rate. It sets no gauge: its run records what it saw
 * (`countHealth`), and every replica's gauges read that from the database (`MirrorGauges`), so
 * none keeps a level that only it saw.
 */
export async function checkWebhookHealth(
  deps: HealthCheckDeps,
  signal?: AbortSignal,
): Promise<WebhookHealth> {
  const { db, log } = deps;
  const before = new Map((await listStoredWebhooks(db.knex, db)).map((w) => [w.id, w.last_error]));
  const answered = await deps.api.webhooks.list(signal);
  await deps.secrets.refresh(db);
  const listed = deps.secrets.scrubListed(answered);
  // One whose id cannot be named is counted by state, but has no row to record or compare with.
  const { named, inexact } = splitListed(listed);
  warnInexactIds(log, inexact, deps.warnedInexact);
  await recordListedWebhooks(db.knex, db, named);
  for (const w of named) {
    if (w.last_error !== null && w.last_error !== before.get(storableText(w.id))) {
      // A dropped delivery: the poll will pick the review up, but the endpoint needs attention.
      log.warn({ webhookId: w.id, lastError: w.last_error }, 'platform recorded a webhook delivery failure');
    }
  }
  return { listed, states: countStates(listed), miss: await readWebhookMissRate(db.knex, db) };
}

/** The miss rate's counts in a health run's counts (`sync_runs.counts`); the states are keyed by name. */
const MISS_KEYS = { feed: 'first_seen_by_feed', webhook: 'first_seen_by_webhook' } as const;

/** Records `health` in its run's counts: what the webhook gauges of every replica are read from. */
export function countHealth(counts: RunCounts, health: WebhookHealth): void {
  addCount(counts, 'listed', health.listed.length);
  for (const state of WEBHOOK_STATES) addCount(counts, state, health.states[state]);
  addCount(counts, MISS_KEYS.feed, health.miss.feed);
  addCount(counts, MISS_KEYS.webhook, health.miss.webhook);
}

/**
 * What a health run recorded with `countHealth`, or undefined for a run recorded by a version
 * that kept it in its own gauges only (`listed` alone).
 */
export function healthOfCounts(counts: RunCounts): Omit<WebhookHealth, 'listed'> | undefined {
  const keys = [...WEBHOOK_STATES, MISS_KEYS.feed, MISS_KEYS.webhook];
  if (!keys.every((key) => typeof counts[key] === 'number')) return undefined;
  const n = (key: string) => counts[key] as number;
  return {
    states: { active: n('active'), inactive: n('inactive'), failing: n('failing') },
    miss: missRate(n(MISS_KEYS.feed), n(MISS_KEYS.webhook)),
  };
}
