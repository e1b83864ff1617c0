import { type Config, requireApi } from '../config/schema.js';
import type { Logger } from '../log.js';
import { type ContactsApi, makeContactsApi } from './contacts.js';
import { type EventsApi, makeEventsApi } from './events.js';
import { type ApiMetrics, type HttpClientOptions, makeHttpClient } from './http.js';
import { type LocationsApi, makeLocationsApi } from './locations.js';
import { makeProfessionalsApi, type ProfessionalsApi } from './professionals.js';
import { DEFAULT_BACKOFF } from './retryPolicy.js';
import { makeReviewsApi, type ReviewsApi } from './reviews.js';
import { makeWebhooksApi, type WebhooksApi } from './webhooks.js';

/**
 * The partner API client: the transport (`http.ts`: pool, key, timeouts, retries, errors)
 * composed with one module per resource group, each beside its zod schema (`reviews.ts` +
 * `reviewsSchema.ts`, …). Every resource module exports `make<X>Api(http, options)` returning
 * its methods. A new endpoint is one small file (plus its schema) and one line below, e.g.
 * `contacts: makeContactsApi(http, options)` for `api.contacts.upsert`.
 */

export interface PartnerApiOptions extends HttpClientOptions {
  /** Records per page (1–100). */
  readonly pageSize: number;
  /** Pages one walk may follow before it fails as a runaway feed. Default: 1,000,000. */
  readonly maxPagesPerWalk?: number;
}

export interface PartnerApi {
  readonly pageSize: number;
  readonly reviews: ReviewsApi;
  readonly locations: LocationsApi;
  readonly professionals: ProfessionalsApi;
  readonly webhooks: WebhooksApi;
  readonly contacts: ContactsApi;
  readonly events: EventsApi;
  /** See HttpClient.onRateLimited: one pause for every concurrent sender. */
  onRateLimited(listener: (delayMs: number) => void): () => void;
  /** See HttpClient.stopRetrying: shutdown does not wait out back-offs. */
  stopRetrying(): void;
  close(): Promise<void>;
}

/** Generous: a real feed is far shorter; only a platform serving pages for ever reaches it. */
const DEFAULT_MAX_PAGES_PER_WALK = 1_000_000;

export function makePartnerApi(options: PartnerApiOptions): PartnerApi {
  const http = makeHttpClient(options);
  const resource = {
    pageSize: options.pageSize,
    maxPagesPerWalk: options.maxPagesPerWalk ?? DEFAULT_MAX_PAGES_PER_WALK,
  };
  return {
    pageSize: options.pageSize,
    reviews: makeReviewsApi(http, resource),
    locations: makeLocationsApi(http, resource),
    professionals: makeProfessionalsApi(http, resource),
    webhooks: makeWebhooksApi(http),
    contacts: makeContactsApi(http),
    events: makeEventsApi(http),
    onRateLimited: (listener) => http.onRateLimited(listener),
    stopRetrying: () => http.stopRetrying(),
    close: () => http.close(),
  };
}

/** The options for the configured platform (`REVIEWS_API_URL`, `REVIEWS_API_KEY`, `API_*`). */
export function partnerApiOptions(config: Config, log: Logger, metrics?: ApiMetrics): PartnerApiOptions {
  const { url, key } = requireApi(config);
  return {
    url,
    key,
    connectTimeoutMs: config.api.connectTimeoutMs,
    requestTimeoutMs: config.api.requestTimeoutMs,
    retry: { maxRetries: config.api.maxRetries, budgetMs: config.api.retryBudgetMs, ...DEFAULT_BACKOFF },
    pageSize: config.api.pageSize,
    log,
    metrics,
  };
}
