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

export const webhookSchema = z.object({
  id: z.union([z.string().min(1), z.number()]).transform(String),
  url: z.string(),
  events: z.array(z.string()).optional().default([]),
  is_active: z.boolean().optional(),
  created_at: z.string().optional(),
  description: z.string().nullable().optional(),
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
