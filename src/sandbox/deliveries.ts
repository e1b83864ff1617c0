import { createHmac } from 'node:crypto';
import { Agent, request } from 'undici';
import type { Logger } from '../log.js';
import type { FaultPlan } from './faults.js';
import { randomHex } from './random.js';
import {
  type Company,
  type DeliveryRecord,
  type ReviewRecord,
  reviewJson,
  type Store,
  type WebhookRecord,
} from './store.js';

/** Waits before retries 1, 2 and 3 (spec 6.4), before scaling by the time scale. */
export const RETRY_DELAYS_MS = [60_000, 300_000, 1_800_000] as const;
/** The first attempt plus the three retries. */
const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

export const EVENT_TYPE = 'review.created';

/** `sha256=` + hex HMAC-SHA256 over `${timestamp}.${rawBody}` (spec 6.3). */
export function signDelivery(secret: string, timestamp: string, rawBody: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${rawBody}`).digest('hex')}`;
}

export interface DelivererOptions {
  store: Store;
  faults: FaultPlan;
  /** Multiplies the retry waits: 1 is real time, 0.001 turns a one-minute wait into 60 ms. */
  timeScale: number;
  /** An attempt with no complete response within this time fails as a timeout. */
  timeoutMs: number;
  log?: Logger | undefined;
}

/**
 * Sends `review.created` to a company's webhooks the way the platform does: signed POSTs, a failure
 * on any non-2xx or timeout, retries after 1, 5 and 30 minutes (scaled), then drop and `last_error`.
 * Every attempt is recorded on the delivery so tests can read the schedule back.
 */
export class Deliverer {
  readonly #options: DelivererOptions;
  readonly #agent = new Agent({ keepAliveTimeout: 1000, connections: 32 });
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #inFlight = new Set<Promise<void>>();
  #closed = false;

  constructor(options: DelivererOptions) {
    this.#options = options;
  }

  /** Starts deliveries of new public reviews: per webhook in submission order (reversed by the `reorder` fault). */
  dispatch(company: Company, reviews: readonly ReviewRecord[]): void {
    for (const webhook of company.webhooks) {
      if (!webhook.isActive || !webhook.events.includes(EVENT_TYPE)) continue;
      const batch = reviews.map((review) => this.#record(company, webhook, review, null));
      if (this.#options.faults.reorderDeliveries) batch.reverse();
      this.#track(
        (async () => {
          for (const { delivery, review } of batch) await this.#attempt(company, webhook, delivery, review);
        })(),
      );
    }
  }

  /** Stops every pending retry (reset); deliveries in flight finish but are not retried. */
  cancelAll(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.cancelAll();
    await this.#agent.destroy().catch(() => {});
    await Promise.allSettled([...this.#inFlight]);
  }

  #record(company: Company, webhook: WebhookRecord, review: ReviewRecord, duplicateOf: string | null) {
    const delivery: DeliveryRecord = {
      id: `dl_${randomHex(10)}`,
      webhookId: webhook.id,
      reviewId: review.id,
      attempts: [],
      state: 'pending',
      duplicateOf,
    };
    company.deliveries.push(delivery);
    return { delivery, review };
  }

  #track(work: Promise<void>): void {
    this.#inFlight.add(work);
    work
      .catch((error: unknown) => this.#options.log?.error({ err: error }, 'sandbox webhook delivery crashed'))
      .finally(() => this.#inFlight.delete(work));
  }

  async #attempt(
    company: Company,
    webhook: WebhookRecord,
    delivery: DeliveryRecord,
    review: ReviewRecord,
  ): Promise<void> {
    if (this.#closed) return;
    if (!company.webhooks.includes(webhook)) {
      delivery.state = 'dropped';
      return;
    }
    const { store, faults } = this.#options;
    const atMs = store.now();
    const outcome =
      delivery.attempts.length < faults.failFirstAttempts
        ? { status: null, error: 'injected failure (not sent)' }
        : await this.#send(webhook, review);
    if (this.#closed) return;
    delivery.attempts.push({ atMs, ...outcome });
    if (outcome.error === null) {
      delivery.state = 'delivered';
      if (delivery.duplicateOf === null && faults.duplicateDelivery()) {
        const copy = this.#record(company, webhook, review, delivery.id);
        await this.#attempt(company, webhook, copy.delivery, review);
      }
      return;
    }
    if (delivery.attempts.length >= MAX_ATTEMPTS) {
      delivery.state = 'dropped';
      webhook.lastError = `${outcome.error} at ${new Date(store.now()).toISOString()}`;
      this.#options.log?.info(
        { webhookId: webhook.id, reviewId: review.id },
        'sandbox webhook delivery dropped',
      );
      return;
    }
    const wait = RETRY_DELAYS_MS[delivery.attempts.length - 1]! * this.#options.timeScale;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      this.#track(this.#attempt(company, webhook, delivery, review));
    }, wait);
    this.#timers.add(timer);
  }

  /** One signed POST, re-signed with a fresh timestamp on every attempt. */
  async #send(
    webhook: WebhookRecord,
    review: ReviewRecord,
  ): Promise<{ status: number | null; error: string | null }> {
    const timestamp = String(Math.floor(this.#options.store.now() / 1000));
    const body = JSON.stringify({ event: EVENT_TYPE, timestamp, data: reviewJson(review) });
    const timeoutMs = this.#options.timeoutMs;
    try {
      const response = await request(webhook.url, {
        method: 'POST',
        dispatcher: this.#agent,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'review-platform-sandbox/1',
          'x-ee-event': EVENT_TYPE,
          'x-ee-timestamp': timestamp,
          'x-ee-signature': signDelivery(webhook.secret, timestamp, body),
        },
        body,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      await response.body.dump();
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      return { status: response.statusCode, error: ok ? null : `HTTP ${response.statusCode}` };
    } catch (error) {
      return { status: null, error: describeSendError(error) };
    }
  }
}

function describeSendError(error: unknown): string {
  const e = error as { name?: string; code?: string; message?: string; cause?: { code?: string } };
  if (
    e.name === 'TimeoutError' ||
    e.name === 'AbortError' ||
    e.code === 'UND_ERR_HEADERS_TIMEOUT' ||
    e.code === 'UND_ERR_BODY_TIMEOUT'
  ) {
    return 'timeout';
  }
  const code = e.code ?? e.cause?.code;
  return `connection error${code ? ` (${code})` : ''}: ${e.message ?? String(error)}`;
}
