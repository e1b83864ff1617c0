import type { Db } from '../db/connect.js';
import type { SecretScrubber } from '../log.js';
import type { WebhooksApi } from '../partner-api/webhooks.js';
import { listActiveSecrets } from './webhooksSql.js';

/**
 * The texts of a webhook, listed or just registered, that the platform writes and that are stored
 * and printed. Not the URL: it is how `ensure` finds our webhook again, and must stay as it is.
 */
interface EchoedTexts {
  last_error: string | null;
  description?: string | undefined;
  events?: string[] | null | undefined;
}

/**
 * The signing secrets a delivery may be signed with: those of the configuration (WEBHOOK_SECRETS)
 * and those stored by `webhooks register`. Several at once is what makes rotation possible:
 * register the new webhook, let both be valid, delete the old one. Every secret loaded is handed
 * to the log scrubber before it can be used.
 */
export class SigningSecrets {
  readonly #configured: readonly string[];
  readonly #scrubber: SecretScrubber;
  #current: readonly string[];
  #lastRefreshMs = Number.NEGATIVE_INFINITY;
  #refreshing: Promise<boolean> | undefined;

  constructor(configured: readonly string[], scrubber: SecretScrubber) {
    this.#configured = [...new Set(configured)];
    this.#scrubber = scrubber;
    for (const s of this.#configured) scrubber.add(s);
    this.#current = this.#configured;
  }

  /**
   * `text` with no secret known here (configured, stored, just registered, the API key): for a
   * text the platform wrote, or an error quoting it, before it is stored, logged or printed. The
   * one scrubbing entry point of the webhook code: the other methods scrub through it.
   */
  scrub(text: string): string {
    return this.#scrubber.scrub(text);
  }

  /**
   * `listed` with no secret known here (configured, stored, just registered, the API key) in the
   * texts the platform writes: a `last_error` may echo the secret a delivery was signed with, and
   * it is stored and printed. Call after `refresh`, so that the stored secrets are known.
   */
  scrubListed<W extends EchoedTexts>(listed: readonly W[]): W[] {
    return listed.map((w) => this.#scrubEchoed(w));
  }

  /**
   * `webhooks` whose registration answers come with no known secret in their texts, as the list's
   * (see scrubListed): the platform may echo the very secret it has just made in the answer's own
   * `description`, so that secret is hidden first. The answer's `signing_secret` is left as it is:
   * it is what the registration stores. Call after `refresh`.
   */
  scrubbingRegistrations(webhooks: WebhooksApi): WebhooksApi {
    return {
      ...webhooks,
      register: async (input, signal) => {
        const answer = await webhooks.register(input, signal);
        // Not stored yet, so unknown to the scrubber until now.
        this.#scrubber.add(answer.signing_secret);
        return this.#scrubEchoed(answer);
      },
    };
  }

  #scrubEchoed<W extends EchoedTexts>(webhook: W): W {
    const scrub = <T extends string | null | undefined>(text: T): T =>
      (typeof text === 'string' ? this.scrub(text) : text) as T;
    return {
      ...webhook,
      last_error: scrub(webhook.last_error),
      description: scrub(webhook.description),
      events: webhook.events?.map(scrub) ?? webhook.events,
    };
  }

  /** The set in force; read once per delivery. */
  current(): readonly string[] {
    return this.#current;
  }

  /** Re-reads the stored secrets (after register/delete, and on the health poll). */
  async refresh(db: Db): Promise<readonly string[]> {
    const stored = await listActiveSecrets(db.knex, db);
    for (const s of stored) this.#scrubber.add(s);
    this.#current = [...new Set([...stored, ...this.#configured])];
    this.#lastRefreshMs = Date.now();
    return this.#current;
  }

  /**
   * Re-reads the stored secrets at most once per `minIntervalMs`, for a delivery no secret in
   * force matched: a secret just stored by `webhooks register` in another process is accepted
   * at once instead of at the next health poll, while forged deliveries cost at most one query
   * per interval. Resolves whether the set changed.
   */
  refreshSoon(db: Db, minIntervalMs = 1000): Promise<boolean> {
    if (this.#refreshing) return this.#refreshing;
    if (Date.now() - this.#lastRefreshMs < minIntervalMs) return Promise.resolve(false);
    const before = this.#current;
    this.#refreshing = this.refresh(db)
      .then((after) => after.length !== before.length || after.some((s, i) => s !== before[i]))
      .catch(() => false)
      .finally(() => {
        this.#refreshing = undefined;
      });
    return this.#refreshing;
  }
}
