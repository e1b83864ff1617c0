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
 * Why an id the platform sent as a JSON number, which the spec does not show (2.4 types it as
 * text), may not be the one it sent, or undefined when JSON.parse read it exactly. One past 2^53
 * is read as the nearest double (9007199254740993 as 9007199254740992), and one with a fraction or
 * an exponent may be written back otherwise than sent: either would name another webhook or none,
 * so matching, updating or deleting by it is never done.
 */
function inexactId(value: number): string | undefined {
  if (Number.isSafeInteger(value)) return undefined;
  return Number.isInteger(value)
    ? `is a number past 2^53 (read as ${value}), which JSON cannot carry exactly`
    : `is a number that is not a whole number (read as ${value}), which may be written back otherwise`;
}

// Stored as the primary key: a registration whose id cannot be stored is deleted again
// (src/webhooks/register.ts), so its answer takes any text and the bound is checked there. A
// number read inexactly cannot be deleted again: that is left to the operator.
const anyId = z
  .union([
    z.string().min(1),
    z.number().superRefine((value, ctx) => {
      const what = inexactId(value);
      if (what === undefined) return;
      ctx.addIssue({
        code: 'custom',
        message: `${what}: the id as read may name another webhook; the webhook was registered, but its secret is not stored and it is not deleted again: delete it by hand (\`review-mirror webhooks delete <its id as the platform shows it>\`)`,
      });
    }),
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

// Any other id that cannot be used (none, empty, too long to index) refuses the list, naming it, as
// the list's other invalid answers do: ensure must not plan on a list with webhooks missing.
const webhookEntrySchema = z.object({ id: z.union([indexedText, z.number()]), ...webhookFields });
type WebhookFields = Omit<z.infer<typeof webhookEntrySchema>, 'id'>;

/** A listed webhook, named by its id. */
export type Webhook = WebhookFields & { id: string };

/**
 * A listed webhook whose id JSON.parse may have altered (see inexactId): shown and counted, but
 * never matched, recorded, updated or deleted, since its id as read may name another webhook. It
 * is that entry's problem alone: the list's other webhooks are used as usual.
 */
export type WebhookWithInexactId = WebhookFields & {
  readonly id?: undefined;
  /** Its index in the platform's list (`webhooks[position]`): it has no other name here. */
  readonly position: number;
  /** How its id was read, and why that cannot name it. */
  readonly idProblem: string;
};

export type ListedWebhook = Webhook | WebhookWithInexactId;

/** The entries of a list that can be named by their id, and those that cannot. */
export function splitListed<W extends ListedWebhook>(
  listed: readonly W[],
): { named: Array<Extract<W, Webhook>>; inexact: Array<Exclude<W, Webhook>> } {
  const named: Array<Extract<W, Webhook>> = [];
  const inexact: Array<Exclude<W, Webhook>> = [];
  for (const w of listed) {
    if (w.id === undefined) inexact.push(w as Exclude<W, Webhook>);
    else named.push(w as Extract<W, Webhook>);
  }
  return { named, inexact };
}

function listedWebhook(
  { id, ...fields }: z.infer<typeof webhookEntrySchema>,
  position: number,
): ListedWebhook {
  const problem = typeof id === 'number' ? inexactId(id) : undefined;
  return problem === undefined ? { ...fields, id: String(id) } : { ...fields, position, idProblem: problem };
}

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
    z.object({ webhooks: z.array(webhookEntrySchema).nullable() }),
  )
  .transform((v): ListedWebhook[] => (v.webhooks ?? []).map(listedWebhook));

export const REVIEW_CREATED_EVENT = 'review.created';
