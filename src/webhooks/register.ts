import type { Db } from '../db/connect.js';
import { describeError } from '../errors.js';
import type { PartnerApi } from '../partner-api/client.js';
import type { RegisteredWebhook } from '../partner-api/webhooksSchema.js';
import { saveRegistration } from './webhooksSql.js';

/**
 * Registers a webhook for review.created and stores its signing secret, which the platform shows
 * in this answer only. `onSecret` sees the secret before anything else can print it (the scrubber).
 *
 * PostgreSQL text cannot hold U+0000, and a secret cannot be altered to fit: a webhook whose secret
 * is not stored sends deliveries nobody can verify. Such a webhook is deleted again and the
 * registration fails with the reason, never with the secret.
 */
export async function registerWebhook(
  api: Pick<PartnerApi, 'webhooks'>,
  db: Db,
  input: { url: string; description?: string | undefined },
  options: { signal?: AbortSignal | undefined; onSecret?: (secret: string) => void } = {},
): Promise<RegisteredWebhook> {
  const webhook = await api.webhooks.register(input, options.signal);
  options.onSecret?.(webhook.signing_secret);
  if (webhook.signing_secret.includes('\u0000')) {
    const deleted = await api.webhooks.delete(webhook.id, options.signal).then(
      () => 'it was deleted again',
      (error: unknown) =>
        `deleting it failed too (${describeError(error)}): delete it with \`review-mirror webhooks delete ${webhook.id}\``,
    );
    throw new Error(
      `the platform registered webhook ${webhook.id} with a signing secret that holds a NUL character (U+0000), which the database cannot store; ${deleted}`,
    );
  }
  await saveRegistration(db.knex, db, {
    ...webhook,
    description: webhook.description ?? input.description ?? null,
  });
  return webhook;
}
