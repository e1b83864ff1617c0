import type { Db } from '../db/connect.js';
import { webhookState } from '../webhooks/health.js';
import { readLastDeliveryAt } from '../webhooks/inboxSql.js';
import { listStoredWebhooks, type MissRate, readWebhookMissRate } from '../webhooks/webhooksSql.js';
import { hasTables } from './statusSql.js';

/** The webhook part of `review-mirror status`: read from the database alone, no API call. */
export interface WebhookStatus {
  webhooks: Array<{
    id: string;
    url: string;
    state: string;
    last_error: string | null;
    /** Last time the platform's list showed it (health poll, `webhooks list`). */
    checked_at: string | null;
    secret_stored: boolean;
  }>;
  last_delivery_at: string | null;
  /** Reviews first seen in the last 24 h by the feed rather than a webhook. */
  miss_rate_24h: MissRate;
}

const iso = (v: Date | string | null): string | null => (v === null ? null : new Date(v).toISOString());

/** Null while the webhook tables do not exist yet (migrations pending). */
export async function readWebhookStatus(db: Db): Promise<WebhookStatus | null> {
  if (!(await hasTables(db.knex, db, ['webhooks']))) return null;
  const stored = await listStoredWebhooks(db.knex, db);
  const lastDeliveryAt = await readLastDeliveryAt(db.knex, db);
  return {
    webhooks: stored.map((w) => ({
      id: w.id,
      url: w.url,
      state: w.checked_at === null ? 'unchecked' : webhookState(w),
      last_error: w.last_error,
      checked_at: iso(w.checked_at),
      secret_stored: w.signing_secret !== null,
    })),
    last_delivery_at: iso(lastDeliveryAt),
    miss_rate_24h: await readWebhookMissRate(db.knex, db),
  };
}

export function formatWebhookStatus(status: WebhookStatus | null | undefined): string[] {
  if (!status) return [];
  const lines = ['webhooks:'];
  if (status.webhooks.length === 0)
    lines.push('  (none known: `review-mirror webhooks list` or set WEBHOOK_PUBLIC_URL)');
  for (const w of status.webhooks) {
    const secret = w.secret_stored ? 'secret stored' : 'secret not stored';
    const error = w.last_error ? `  last_error: ${w.last_error}` : '';
    lines.push(`  ${w.id}  ${w.url}  ${w.state}  ${secret}  checked ${w.checked_at ?? 'never'}${error}`);
  }
  const miss = status.miss_rate_24h;
  const ratio = miss.ratio === null ? '-' : `${(miss.ratio * 100).toFixed(1)}%`;
  lines.push(`  last delivery: ${status.last_delivery_at ?? 'never'}`);
  lines.push(
    `  missed by webhooks (24 h): ${ratio} (feed first ${miss.feed}, webhook first ${miss.webhook})`,
  );
  return lines;
}
