import { z } from 'zod';
import { SandboxError } from './store.js';

/** zod schemas of every body the sandbox accepts, partner API and control API alike. */

const required = (what: string) => (issue: { input: unknown }) =>
  issue.input === undefined ? 'is required' : `must be ${what}`;

const requiredText = z
  .string({ error: required('a string') })
  .trim()
  .min(1, 'must not be empty');
const optionalText = z.string({ error: 'must be a string' }).optional();
const nullableText = z.string({ error: 'must be a string' }).nullish();
const requiredEmail = z.email({ error: required('an email address') });

export const locationBody = z.object({
  name: requiredText,
  slug: optionalText,
  address_1: nullableText,
  address_2: nullableText,
  city: nullableText,
  state: nullableText,
  zip: nullableText,
  active: z.boolean({ error: 'must be true or false' }).optional(),
});

export const professionalBody = z.object({
  first_name: requiredText,
  last_name: requiredText,
  email: requiredEmail,
  slug: optionalText,
  location_id: z.int({ error: 'must be an integer' }).nullish(),
  active: z.boolean({ error: 'must be true or false' }).optional(),
});

export const contactBody = z.object({
  email: requiredEmail,
  name: nullableText,
  external_id: nullableText,
  professional_id: nullableText,
});

/** Free-form dotted names (`matter.closed`, `visit.completed.v2`); the platform keeps no fixed list. */
export const EVENT_TYPE_PATTERN = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

export const eventBody = z.object({
  email: z.email({ error: 'must be an email address' }).optional(),
  contact_id: optionalText,
  event_type: z
    .string({ error: required('a string') })
    .max(200, 'must be at most 200 characters')
    .regex(EVENT_TYPE_PATTERN, 'must be a dotted name such as matter.closed'),
  professional_id: nullableText,
  metadata: z.record(z.string(), z.unknown(), { error: 'must be a JSON object' }).nullish(),
});

export const webhookBody = z.object({
  url: z.string({ error: required('a string') }).min(1, 'must not be empty'),
  events: z
    .array(z.string(), { error: required('an array of event names') })
    .min(1, 'must not be empty')
    .refine((events) => events.every((e) => e === 'review.created'), 'may only contain "review.created"'),
  description: nullableText,
});

// --- control API ------------------------------------------------------------------------------

export const companyBody = z.object({
  name: z.string().min(1).optional(),
  api_key: z.string().min(1).max(200).optional(),
});

export const keyBody = z.object({ api_key: z.string().min(1).max(200).optional() });

export const reviewInput = z.strictObject({
  id: z.uuid({ error: 'must be a UUID' }).optional(),
  created_at: z.iso.datetime({ offset: true, error: 'must be an ISO 8601 timestamp' }).optional(),
  rating: z.number().min(1).max(5).optional(),
  comment: z.string().nullable().optional(),
  is_verified: z.boolean().optional(),
  reviewer_name: z.string().nullable().optional(),
  reviewer_email: z.string().nullable().optional(),
  professional_id: z.string().nullable().optional(),
  professional_name: z.string().nullable().optional(),
  public: z.boolean().optional(),
  suppressed: z.boolean().optional(),
});

export const reviewsBody = z.object({
  reviews: z.array(reviewInput).max(100_000),
});

export const seedBody = z.object({
  count: z.int().min(0).max(5_000_000),
  seed: z.int().optional(),
});

const fraction = z.number().min(0).max(1);

export const RETRY_AFTER_FORMS = ['seconds', 'http-date', 'absent'] as const;

export const INVALID_REVIEW_SHAPES = ['rating', 'created_at', 'missing_id'] as const;
export type InvalidReviewShape = (typeof INVALID_REVIEW_SHAPES)[number];

const pageCount = z.int().min(0).max(10_000_000);

/**
 * The review feed lying about its pages, from the page after the first N of a walk on (pages are
 * counted by position, so every walk with the same limit meets the fault at the same page).
 */
export const paginationFaultsSchema = z
  .strictObject({
    /** That page answers `has_more: true` with `next_cursor: null`. */
    nullCursorAfterPages: pageCount.optional(),
    /** That page answers with the very cursor it was asked with, so a client following it loops. */
    repeatCursorAfterPages: pageCount.min(1).optional(),
    /** That page and every one after repeat the same reviews under a fresh cursor each time. */
    identicalPagesAfterPages: pageCount.min(1).optional(),
  })
  .refine(
    (p) => Object.values(p).filter((v) => v !== undefined).length <= 1,
    'only one of nullCursorAfterPages, repeatCursorAfterPages, identicalPagesAfterPages at a time',
  );

export const partnerFaultsSchema = z
  .strictObject({
    error500: fraction.optional(),
    error429: fraction.optional(),
    /** 503, with a Retry-After only when `retryAfterSeconds` is given: a platform down for maintenance. */
    error503: fraction.optional(),
    retryAfterSeconds: z.int().min(0).max(86_400).optional(),
    /**
     * How an injected 429 or 503 writes its Retry-After: `seconds` (the default), `http-date` (the
     * moment `retryAfterSeconds` from now, as an IMF-fixdate), or `absent` (no header at all).
     */
    retryAfterForm: z.enum(RETRY_AFTER_FORMS).optional(),
    delay: fraction.optional(),
    delayMs: z.int().min(0).max(600_000).optional(),
    hang: fraction.optional(),
    truncated: fraction.optional(),
    /** The handler runs (writes happen), then the answer is held `delayMs`: past a client's timeout, a lost answer. */
    lateAnswer: fraction.optional(),
    /** Path prefixes (e.g. `/api/v1/partner/reviews`) the drawn faults and echoKey apply to; all partner routes when omitted. */
    routes: z.array(z.string().min(1)).optional(),
    /** HTTP methods the drawn faults apply to (e.g. POST only: creates time out, reads pass); all when omitted. */
    methods: z.array(z.enum(['GET', 'POST', 'PUT', 'DELETE'])).optional(),
    /** Reviews served in a broken shape by the feed: a fraction of all (drawn per review id) or these ids. */
    invalidReviews: z.union([fraction, z.array(z.string().min(1)).max(100_000)]).optional(),
    /** How an invalid review is broken; drawn per review id when omitted. */
    invalidReviewShape: z.enum(INVALID_REVIEW_SHAPES).optional(),
    /** Error bodies echo the request's API key; requests not failed otherwise are answered 400. */
    echoKey: z.boolean().optional(),
    pagination: paginationFaultsSchema.optional(),
  })
  .refine(
    (f) =>
      (f.error500 ?? 0) +
        (f.error429 ?? 0) +
        (f.error503 ?? 0) +
        (f.hang ?? 0) +
        (f.truncated ?? 0) +
        (f.lateAnswer ?? 0) <=
      1,
    'error500 + error429 + error503 + hang + truncated + lateAnswer must not exceed 1',
  );

export const webhookFaultsSchema = z.strictObject({
  duplicate: fraction.optional(),
  reorder: z.boolean().optional(),
  failFirst: z.int().min(0).max(100).optional(),
});

export const faultsBody = z.strictObject({
  partner: partnerFaultsSchema.optional(),
  webhooks: webhookFaultsSchema.optional(),
});

export type Faults = z.infer<typeof faultsBody>;

/** Parses a request body, turning every zod issue into one readable 422 message. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new SandboxError(422, 'body must be a JSON object');
  }
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  throw new SandboxError(422, describeIssues(parsed.error.issues));
}

export function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .map((issue) => (issue.path.length > 0 ? `${issue.path.join('.')} ${issue.message}` : issue.message))
    .join('; ');
}
