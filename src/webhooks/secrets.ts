import type { Db } from '../db/connect.js';
import type { SecretScrubber } from '../log.js';
import { listActiveSecrets } from './webhooksSql.js';

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

  /** Hands a secret not yet stored (a registration's, just answered) to the log scrubber. */
  hide(secret: string): void {
    this.#scrubber.add(secret);
  }

  /**
   * `listed` with no secret known here (configured, stored, just registered, the API key) in the
   * texts the platform writes: a `last_error` may echo the secret a delivery was signed with, and
   * it is stored and printed. Call after `refresh`, so that the stored secrets are known.
   */
  scrubListed<W extends { last_error: string | null; description?: string | undefined }>(
    listed: readonly W[],
  ): W[] {
    const scrub = <T extends string | null | undefined>(text: T): T =>
      (typeof text === 'string' ? this.#scrubber.scrub(text) : text) as T;
    return listed.map((w) => ({ ...w, last_error: scrub(w.last_error), description: scrub(w.description) }));
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
