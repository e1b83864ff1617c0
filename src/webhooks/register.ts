import type { Db } from '../db/connect.js';
import { describeError } from '../errors.js';
import type { PartnerApi } from '../partner-api/client.js';
import { indexedText } from '../partner-api/indexedText.js';
import type { RegisteredWebhook } from '../partner-api/webhooksSchema.js';
import { saveRegistration } from './webhooksSql.js';

/**
 * Registers a webhook for review.created and stores its signing secret, which the platform shows
 * in this answer only (SigningSecrets.scrubbingRegistrations hides it from what is logged and shown).
 * The answer's informational fields may be missing: the URL and label asked for stand in.
 *
 * PostgreSQL text cannot hold U+0000, and a secret cannot be altered to fit; nor can an id the
 * primary key cannot index be shortened: a webhook whose secret is not stored sends deliveries
 * nobody can verify. Such a webhook is deleted again and the registration fails with the reason,
 * never with the secret.
 */
export async function registerWebhook(
  api: Pick<PartnerApi, 'webhooks'>,
  db: Db,
  input: { url: string; description?: string | undefined },
  options: { signal?: AbortSignal | undefined } = {},
): Promise<RegisteredWebhook & { url: string }> {
  const answer = await api.webhooks.register(input, options.signal);
  const webhook = { ...answer, url: answer.url ?? input.url };
  const problem = unstorable(webhook);
  if (problem !== undefined) {
    const deleted = await api.webhooks.delete(webhook.id, options.signal).then(
      () => 'it was deleted again',
      (error: unknown) =>
        `deleting it failed too (${describeError(error)}): delete it with \`review-mirror webhooks delete ${webhook.id}\``,
    );
    throw new Error(`the platform registered ${problem}, which the database cannot store; ${deleted}`);
  }
  await saveRegistration(db.knex, db, {
    ...webhook,
    description: webhook.description ?? input.description ?? null,
  });
  return webhook;
}

/** What of a registration the database cannot store, as "webhook … with …", or undefined. */
function unstorable({ id, signing_secret }: RegisteredWebhook): string | undefined {
  if (signing_secret.includes('\u0000')) {
    return `webhook ${id} with a signing secret that holds a NUL character (U+0000)`;
  }
  const idIssue = indexedText.safeParse(id).error?.issues[0];
  // The id itself would make the message unreadable: the delete command names it in full.
  if (idIssue !== undefined) return `a webhook with an id of ${id.length} characters (${idIssue.message})`;
  return undefined;
}
