import type { Db } from '../db/connect.js';
import type { Logger } from '../log.js';
import type { PartnerApi } from '../partner-api/client.js';
import type { Webhook } from '../partner-api/webhooksSchema.js';
import { registerWebhook } from './register.js';
import type { SigningSecrets } from './secrets.js';
import { listWebhookIdsWithSecret, markWebhookDeleted, recordListedWebhooks } from './webhooksSql.js';

export interface EnsurePlan {
  /** The webhook to keep, when one of those listed can be kept. */
  readonly keep: string | undefined;
  /** Register a new webhook for the URL (no usable one exists). */
  readonly register: boolean;
  /** Other webhooks with the same URL, deleted after a registration succeeded. */
  readonly remove: readonly string[];
}

/**
 * Pure decision for "exactly one webhook with this URL". A webhook whose secret we stored is kept;
 * failing that, an existing one is kept only if the operator configured secrets (it is presumably
 * one of them); otherwise we cannot verify its deliveries, so a new one is registered and the
 * others removed.
 */
export function planEnsure(
  listed: readonly Pick<Webhook, 'id' | 'url' | 'created_at'>[],
  url: string,
  storedWithSecret: ReadonlySet<string>,
  haveConfiguredSecrets: boolean,
): EnsurePlan {
  const matching = listed
    .filter((w) => w.url === url)
    .sort((a, b) => (a.created_at ?? '').localeCompare(b.created_at ?? '') || a.id.localeCompare(b.id));
  const ours = matching.filter((w) => storedWithSecret.has(w.id));
  const keep = ours.at(-1)?.id ?? (haveConfiguredSecrets ? matching[0]?.id : undefined);
  return {
    keep,
    register: keep === undefined,
    remove: matching.filter((w) => w.id !== keep).map((w) => w.id),
  };
}

export interface EnsureDeps {
  readonly api: Pick<PartnerApi, 'webhooks'>;
  readonly db: Db;
  readonly secrets: SigningSecrets;
  readonly log: Logger;
  readonly haveConfiguredSecrets: boolean;
}

/** `run` with WEBHOOK_PUBLIC_URL: makes sure exactly one webhook with that URL exists. */
export async function ensureRegistration(
  deps: EnsureDeps,
  url: string,
  signal?: AbortSignal,
): Promise<EnsurePlan> {
  const { api, db, log } = deps;
  const listed = await api.webhooks.list(signal);
  await recordListedWebhooks(db.knex, db, listed);
  const stored = await listWebhookIdsWithSecret(db.knex, db);
  const plan = planEnsure(listed, url, stored, deps.haveConfiguredSecrets);
  if (plan.register) {
    const created = await registerWebhook(
      api,
      db,
      { url, description: 'review-mirror' },
      { signal, onSecret: (secret) => deps.secrets.hide(secret) },
    );
    log.info({ webhookId: created.id }, 'webhook registered for WEBHOOK_PUBLIC_URL');
  }
  for (const id of plan.remove) {
    await api.webhooks.delete(id, signal);
    await markWebhookDeleted(db.knex, db, id);
    log.info({ webhookId: id }, 'duplicate webhook for WEBHOOK_PUBLIC_URL deleted');
  }
  await deps.secrets.refresh(db);
  return plan;
}
