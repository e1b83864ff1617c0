import type { Db } from '../db/connect.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { PartnerApi } from '../partner-api/client.js';
import type { Webhook } from '../partner-api/webhooksSchema.js';
import type { SigningSecrets } from './secrets.js';
import { listStoredWebhooks, readWebhookMissRate, recordListedWebhooks } from './webhooksSql.js';

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
  readonly metrics?: Metrics | undefined;
}

/**
 * The scheduled health poll: reads the platform's webhook list, records state and last_error of
 * each, refreshes the accepted secrets, and updates the gauges (including the miss rate).
 */
export async function checkWebhookHealth(deps: HealthCheckDeps, signal?: AbortSignal): Promise<Webhook[]> {
  const { db, log, metrics } = deps;
  const before = new Map((await listStoredWebhooks(db.knex, db)).map((w) => [w.id, w.last_error]));
  const listed = await deps.api.webhooks.list(signal);
  await recordListedWebhooks(db.knex, db, listed);
  await deps.secrets.refresh(db);
  for (const w of listed) {
    if (w.last_error !== null && w.last_error !== before.get(w.id)) {
      // A dropped delivery: the poll will pick the review up, but the endpoint needs attention.
      log.warn({ webhookId: w.id, lastError: w.last_error }, 'platform recorded a webhook delivery failure');
    }
  }
  if (metrics) {
    const counts = countStates(listed);
    for (const state of WEBHOOK_STATES) metrics.webhooks.set({ state }, counts[state]);
    const miss = await readWebhookMissRate(db.knex, db);
    if (miss.ratio !== null) metrics.webhookMissRatio.set(miss.ratio);
  }
  return listed;
}
