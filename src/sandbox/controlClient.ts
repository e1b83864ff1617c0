import { z } from 'zod';
import type { Faults } from './schema.js';

/**
 * A typed client for the sandbox's control API, for tests, the demo and benchmarks. Responses
 * are validated with zod like any payload crossing a wire; non-2xx answers throw with the
 * sandbox's error message.
 */

export const reviewSchema = z.object({
  id: z.string(),
  review_number: z.string(),
  created_at: z.string(),
  rating: z.number(),
  comment: z.string().nullable(),
  is_verified: z.boolean(),
  reviewer: z.object({ name: z.string().nullable(), email: z.string().nullable() }),
  professional: z.object({ id: z.string().nullable(), name: z.string().nullable() }),
});
export type Review = z.infer<typeof reviewSchema>;

export const truthReviewSchema = reviewSchema.extend({ public: z.boolean(), suppressed: z.boolean() });
export type TruthReview = z.infer<typeof truthReviewSchema>;

const attemptSchema = z.object({
  at: z.string(),
  status: z.number().nullable(),
  error: z.string().nullable(),
});

export const deliverySchema = z.object({
  id: z.string(),
  webhook_id: z.string(),
  review_id: z.string(),
  state: z.enum(['pending', 'delivered', 'dropped']),
  duplicate_of: z.string().nullable(),
  attempts: z.array(attemptSchema),
});

const addressSchema = z.object({
  line1: z.string(),
  line2: z.string(),
  city: z.string(),
  state: z.string(),
  zip: z.string(),
});

export const truthSchema = z.object({
  company_id: z.string(),
  name: z.string(),
  reviews: z.array(truthReviewSchema),
  locations: z.array(
    z.object({
      id: z.number(),
      slug: z.string(),
      name: z.string(),
      active: z.boolean(),
      address: addressSchema,
      profile_url: z.string(),
      default_survey_url: z.string().nullable(),
      created_at: z.string(),
    }),
  ),
  professionals: z.array(
    z.object({
      id: z.string(),
      slug: z.string(),
      first_name: z.string(),
      last_name: z.string(),
      email: z.string(),
      active: z.boolean(),
      location_id: z.number().nullable(),
      profile_url: z.string(),
      default_survey_url: z.string().nullable(),
      created_at: z.string(),
    }),
  ),
  contacts: z.array(
    z.object({
      id: z.string(),
      email: z.string(),
      name: z.string().nullable(),
      external_id: z.string().nullable(),
      professional_id: z.string().nullable(),
      created_at: z.string(),
      updated_at: z.string(),
    }),
  ),
  events: z.array(
    z.object({
      id: z.string(),
      contact_id: z.string(),
      email: z.string(),
      event_type: z.string(),
      professional_id: z.string().nullable(),
      metadata: z.record(z.string(), z.unknown()).nullable(),
      received_at: z.string(),
      status: z.literal('queued'),
    }),
  ),
  invites: z.array(z.object({ email: z.string(), professional_id: z.string(), sent_at: z.string() })),
  webhooks: z.array(
    z.object({
      id: z.string(),
      url: z.string(),
      events: z.array(z.string()),
      is_active: z.boolean(),
      created_at: z.string(),
      description: z.string().nullable(),
      last_error: z.string().nullable(),
      signing_secret: z.string(),
    }),
  ),
  deliveries: z.array(deliverySchema),
});
export type Truth = z.infer<typeof truthSchema>;

export const requestCountsSchema = z.object({
  total: z.number(),
  by_route: z.record(z.string(), z.record(z.string(), z.number())),
});
export type RequestCounts = z.infer<typeof requestCountsSchema>;

/** A review to submit; every field is optional and generated when omitted. */
export interface ReviewSubmission {
  id?: string;
  created_at?: string;
  rating?: number;
  comment?: string | null;
  is_verified?: boolean;
  reviewer_name?: string | null;
  reviewer_email?: string | null;
  professional_id?: string | null;
  professional_name?: string | null;
  public?: boolean;
  suppressed?: boolean;
}

export type SandboxFaults = Faults;

export class SandboxControlError extends Error {
  override readonly name = 'SandboxControlError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export class SandboxControl {
  readonly #base: string;

  /** `url` is the sandbox's base URL (RunningSandbox.url), without /_sandbox. */
  constructor(url: string) {
    this.#base = `${url.replace(/\/+$/, '')}/_sandbox`;
  }

  async #call<T>(method: string, path: string, schema: z.ZodType<T>, body?: unknown): Promise<T> {
    const response = await fetch(`${this.#base}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body),
    });
    const text = await response.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new SandboxControlError(response.status, `sandbox answered ${response.status} with non-JSON`);
    }
    if (!response.ok) {
      const message = (json as { error?: unknown }).error;
      throw new SandboxControlError(response.status, typeof message === 'string' ? message : text);
    }
    return schema.parse(json);
  }

  createCompany(
    input: { name?: string; api_key?: string } = {},
  ): Promise<{ company_id: string; api_key: string }> {
    return this.#call('POST', '/companies', z.object({ company_id: z.string(), api_key: z.string() }), input);
  }

  async submitReviews(companyId: string, reviews: ReviewSubmission[]): Promise<Review[]> {
    const path = `/companies/${encodeURIComponent(companyId)}/reviews`;
    return (await this.#call('POST', path, z.object({ reviews: z.array(reviewSchema) }), { reviews }))
      .reviews;
  }

  async seed(companyId: string, count: number, seed?: number): Promise<number> {
    const path = `/companies/${encodeURIComponent(companyId)}/seed`;
    return (await this.#call('POST', path, z.object({ count: z.number() }), { count, seed })).count;
  }

  async suppress(reviewId: string): Promise<void> {
    await this.#call('POST', `/reviews/${encodeURIComponent(reviewId)}/suppress`, z.unknown());
  }

  async unsuppress(reviewId: string): Promise<void> {
    await this.#call('POST', `/reviews/${encodeURIComponent(reviewId)}/unsuppress`, z.unknown());
  }

  /** Activates or deactivates a location or professional (it moves between the two `active` listings). */
  async setDirectoryActive(
    companyId: string,
    kind: 'locations' | 'professionals',
    slug: string,
    active: boolean,
  ): Promise<void> {
    const path = `/companies/${encodeURIComponent(companyId)}/${kind}/${encodeURIComponent(slug)}`;
    await this.#call('POST', `${path}/${active ? 'activate' : 'deactivate'}`, z.unknown());
  }

  async deactivateKey(apiKey: string): Promise<void> {
    await this.#call('POST', `/keys/${encodeURIComponent(apiKey)}/deactivate`, z.unknown());
  }

  async activateKey(apiKey: string): Promise<void> {
    await this.#call('POST', `/keys/${encodeURIComponent(apiKey)}/activate`, z.unknown());
  }

  truth(companyId: string): Promise<Truth> {
    return this.#call('GET', `/companies/${encodeURIComponent(companyId)}/truth`, truthSchema);
  }

  /** The feed-visible reviews (public, not suppressed), newest first: what a full mirror must hold. */
  async visibleReviews(companyId: string): Promise<TruthReview[]> {
    const path = `/companies/${encodeURIComponent(companyId)}/truth/reviews?visible=true`;
    return (await this.#call('GET', path, z.object({ reviews: z.array(truthReviewSchema) }))).reviews;
  }

  requests(): Promise<RequestCounts> {
    return this.#call('GET', '/requests', requestCountsSchema);
  }

  async setFaults(faults: SandboxFaults): Promise<void> {
    await this.#call('PUT', '/faults', z.unknown(), faults);
  }

  async reset(): Promise<void> {
    await this.#call('POST', '/reset', z.unknown());
  }
}
