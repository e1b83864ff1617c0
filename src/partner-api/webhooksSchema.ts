import { z } from 'zod';
import { storableJson } from '../db/storableText.js';
import { indexedText } from './indexedText.js';

/**
 * Webhook registration (spec 4.6). The list's shape is "not shown" by the spec: both
 * `{webhooks: [...]}` and a bare array are accepted, extra fields ignored, and so are the answers
 * that can only mean "none" (below).
 */

// `last_error`'s type is not given by the spec: keep text as is, anything else as its JSON
// (storableJson: one nested thousands deep would overflow JSON.stringify's stack, every poll).
const lastError = z
  .unknown()
  .optional()
  .transform((v) =>
    v === undefined || v === null || v === '' ? null : typeof v === 'string' ? v : storableJson(v),
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

// `events` informs too, but ensure (src/webhooks/ensure.ts) must tell a value it cannot read (null
// here) from none given ([]): a webhook whose events are unreadable may be another subscription to
// our URL, so it is neither kept as ours nor deleted as a duplicate of ours.
const events = z
  .unknown()
  .optional()
  .transform((v): string[] | null =>
    v === undefined ? [] : Array.isArray(v) && v.every((e) => typeof e === 'string') ? v : null,
  );

/**
 * An id the platform sends as a JSON number, which the spec does not show (2.4 types it as text):
 * taken only when JSON.parse read it exactly. One past 2^53 is read as the nearest double
 * (9007199254740993 as 9007199254740992), and one with a fraction or an exponent may be written
 * back otherwise than sent: either would name another webhook or none, so matching or deleting by
 * it is never done. `whenRefused` says what becomes of the webhook.
 */
const numericId = (whenRefused: string) =>
  z.number().superRefine((value, ctx) => {
    if (Number.isSafeInteger(value)) return;
    const what = Number.isInteger(value)
      ? `is a number past 2^53 (read as ${value}), which JSON cannot carry exactly`
      : `is a number that is not a whole number (read as ${value}), which may be written back otherwise`;
    ctx.addIssue({
      code: 'custom',
      message: `${what}: the id as read may name another webhook; ${whenRefused}`,
    });
  });

// Stored as the primary key: a registration whose id cannot be stored is deleted again
// (src/webhooks/register.ts), so its answer takes any text and the bound is checked there. A
// number read inexactly cannot be deleted again: that is left to the operator.
const anyId = z
  .union([
    z.string().min(1),
    numericId(
      'the webhook was registered, but its secret is not stored and it is not deleted again: delete it by hand (`review-mirror webhooks delete <its id as the platform shows it>`)',
    ),
  ])
  .transform(String);

const webhookFields = {
  url: optionalText,
  events,
  is_active: optionalFlag,
  created_at: optionalText,
  description: optionalText,
  last_error: lastError,
};

// An entry whose id cannot be used refuses the list, naming it (see webhookListSchema), as the
// list's other invalid answers do: ensure must not plan on a list with webhooks missing. Were such
// entries dropped instead, a platform whose ids are all 64-bit numbers (snowflakes) would list
// none, and every health run would register our URL again, each registration refused in turn.
export const webhookSchema = z.object({
  id: z
    .union([
      indexedText,
      numericId(
        'no webhook of this list is matched or deleted until it is deleted by hand (`review-mirror webhooks delete <its id as the platform shows it>`)',
      ),
    ])
    .transform(String),
  ...webhookFields,
});
export type Webhook = z.infer<typeof webhookSchema>;

// Only the id and the secret must be valid: the answer is the only time the secret is shown.
export const registeredWebhookSchema = z.object({
  id: anyId,
  ...webhookFields,
  signing_secret: z.string().min(1),
});
export type RegisteredWebhook = z.infer<typeof registeredWebhookSchema>;

export const registerResponseSchema = z
  .union([z.object({ webhook: registeredWebhookSchema }), registeredWebhookSchema])
  .transform((v) => ('webhook' in v ? v.webhook : v));

/**
 * One schema, not a union of the shapes: a union's error names a branch's complaint (`Unrecognized
 * key: "webhooks"`) instead of the field at fault (`webhooks[17].id`). Every shape is read as
 * `{webhooks: ...}`: a bare array is the list itself, and an empty body, `null`, `{}` and
 * `{"webhooks": null}` are a company without webhooks, which must still be able to register one.
 * An object holding anything but `webhooks` stays refused: its list may be under another key, and
 * taking it for none would register the URL again and again.
 */
export const webhookListSchema = z
  .preprocess(
    (v) =>
      Array.isArray(v)
        ? { webhooks: v }
        : v === undefined || v === null || (typeof v === 'object' && Object.keys(v).length === 0)
          ? { webhooks: null }
          : v,
    z.object({ webhooks: z.array(webhookSchema).nullable() }),
  )
  .transform((v) => v.webhooks ?? []);

export const REVIEW_CREATED_EVENT = 'review.created';
