import { z } from 'zod';

/**
 * Webhook registration (spec 4.6). The list's shape is "not shown" by the spec: both
 * `{webhooks: [...]}` and a bare array are accepted, extra fields ignored, and so are the answers
 * that can only mean "none" (below).
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

// An empty body, `null`, `{}` and `{"webhooks": null}`: a company without webhooks, which must
// still be able to register one. An object holding anything but `webhooks` stays refused: its
// list may be under another key, and taking it for none would register the URL again and again.
const noWebhooks = z.union([z.undefined(), z.null(), z.strictObject({})]).transform((): Webhook[] => []);

export const webhookListSchema = z
  .union([z.object({ webhooks: z.array(webhookSchema).nullable() }), z.array(webhookSchema), noWebhooks])
  .transform((v) => (Array.isArray(v) ? v : (v.webhooks ?? [])));

export const REVIEW_CREATED_EVENT = 'review.created';
