import { z } from 'zod';

/**
 * Webhook registration (spec 4.6). The list's shape is "not shown" by the spec: both
 * `{webhooks: [...]}` and a bare array are accepted, extra fields ignored.
 */

// `last_error`'s type is not given by the spec: keep text as is, anything else as its JSON.
const lastError = z
  .unknown()
  .optional()
  .transform((v) =>
    v === undefined || v === null || v === '' ? null : typeof v === 'string' ? v : JSON.stringify(v),
  );

// Fields the spec does not type, and that only inform: a value of another type is dropped, never
// a reason to refuse the answer (a registration's answer carries the secret, which must be kept).
const optionalText = z
  .unknown()
  .optional()
  .transform((v) => (typeof v === 'string' ? v : undefined));
const optionalFlag = z
  .unknown()
  .optional()
  .transform((v) => (typeof v === 'boolean' ? v : v === 'true' ? true : v === 'false' ? false : undefined));

export const webhookSchema = z.object({
  id: z.union([z.string().min(1), z.number()]).transform(String),
  url: z.string(),
  events: z.array(z.string()).optional().default([]),
  is_active: optionalFlag,
  created_at: optionalText,
  description: optionalText,
  last_error: lastError,
});
export type Webhook = z.infer<typeof webhookSchema>;

export const registeredWebhookSchema = webhookSchema.extend({ signing_secret: z.string().min(1) });
export type RegisteredWebhook = z.infer<typeof registeredWebhookSchema>;

export const registerResponseSchema = z
  .union([z.object({ webhook: registeredWebhookSchema }), registeredWebhookSchema])
  .transform((v) => ('webhook' in v ? v.webhook : v));

export const webhookListSchema = z
  .union([z.object({ webhooks: z.array(webhookSchema) }), z.array(webhookSchema)])
  .transform((v) => (Array.isArray(v) ? v : v.webhooks));

export const REVIEW_CREATED_EVENT = 'review.created';
