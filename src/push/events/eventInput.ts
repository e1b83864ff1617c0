import { createHash } from 'node:crypto';
import { z } from 'zod';
import { unstorableReasonIn } from '../../db/storableText.js';
import { partnerUuid } from '../../partner-api/uuidText.js';
import { firstHiddenByParse } from '../jsonText.js';
import type { FileRecord, ReadOptions, RowError } from '../readRecords.js';
import { jsonTextBytes, METADATA_MAX_BYTES, unsendableReason } from './metadataSize.js';
import type { NewEvent } from './outboxSql.js';

/** The platform's own rule for event names (dotted, e.g. `matter.closed`). */
const EVENT_TYPE = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

const blankToNull = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? null : v);

const eventSchema = z
  .object({
    // zod counts code points, as PostgreSQL's length() in enqueue_event does: not UTF-16 units.
    // Trimmed as a contact's fields are: "k9 " from one export and "k9" from the next are one event.
    key: z.preprocess(blankToNull, z.string().trim().max(500, 'must be at most 500 characters').nullable()),
    email: z.preprocess(blankToNull, z.email({ error: 'is not an email address' }).max(320).nullable()),
    contact_id: z.preprocess(blankToNull, z.string().max(200, 'must be at most 200 characters').nullable()),
    event_type: z
      .string({ error: 'is missing' })
      .trim()
      .min(1, 'is missing')
      .max(200, 'must be at most 200 characters')
      .regex(EVENT_TYPE, 'must be a dotted name such as matter.closed'),
    professional_id: z.preprocess(blankToNull, partnerUuid.nullable()),
    metadata: z.preprocess(
      (v, ctx) => {
        const blank = blankToNull(v);
        if (typeof blank !== 'string') return blank;
        let parsed: unknown;
        try {
          parsed = JSON.parse(blank);
        } catch {
          // Not "must be a JSON object": the text is no JSON at all (a brace lost, quotes doubled).
          ctx.addIssue({ code: 'custom', message: 'is not valid JSON' });
          return z.NEVER;
        }
        // Only the text shows what parsing changed (1e400 read as Infinity, sent as null): an
        // object's, so that other values are still refused as not being one.
        const altered =
          parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
            ? firstHiddenByParse(blank, 'metadata')
            : undefined;
        if (altered === undefined) return parsed;
        ctx.addIssue({ code: 'custom', message: altered });
        return z.NEVER;
      },
      z
        .record(z.string(), z.unknown(), { error: 'must be a JSON object' })
        .superRefine((m, ctx) => {
          // First: the other checks walk it recursively.
          const unsendable = unsendableReason(m);
          if (unsendable !== undefined) {
            ctx.addIssue({ code: 'custom', message: unsendable });
            return;
          }
          const reason = unstorableReasonIn(m);
          if (reason !== undefined) ctx.addIssue({ code: 'custom', message: reason });
          const bytes = jsonTextBytes(m);
          if (bytes > METADATA_MAX_BYTES) {
            ctx.addIssue({
              code: 'custom',
              message: `is ${bytes} bytes of JSON, more than ${METADATA_MAX_BYTES} (16 KiB): send what the campaign needs (ids, names, a date), not documents`,
            });
          }
        })
        .nullable(),
    ),
  })
  .refine((e) => e.email !== null || e.contact_id !== null, {
    path: ['email'],
    message: 'is missing (give an email or a contact_id)',
  });

export type EventFields = Partial<
  Record<'key' | 'email' | 'contact_id' | 'event_type' | 'professional_id' | 'metadata', unknown>
>;

/**
 * The key of an event that came without one: the same recipient, type and payload (and source
 * row, for a file) is the same event, so enqueueing it again sends nothing.
 */
export function derivedKey(parts: readonly unknown[]): string {
  return `derived:${createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 40)}`;
}

/** Validates one event from any source: the event, or the first field at fault and why. */
export function toNewEvent(
  fields: EventFields,
  source: NewEvent['source'],
  keyParts: readonly unknown[] = [],
): NewEvent | { field: string; reason: string } {
  const parsed = eventSchema.safeParse({
    key: fields.key ?? null,
    email: fields.email ?? null,
    contact_id: fields.contact_id ?? null,
    event_type: fields.event_type,
    professional_id: fields.professional_id ?? null,
    metadata: fields.metadata ?? null,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { field: String(issue.path[0] ?? '(event)'), reason: issue.message };
  }
  const e = parsed.data;
  return {
    key:
      e.key ??
      derivedKey([
        e.email?.toLowerCase() ?? null,
        e.contact_id,
        e.event_type,
        e.professional_id,
        e.metadata,
        ...keyParts,
      ]),
    email: e.email,
    contactId: e.contact_id,
    eventType: e.event_type,
    professionalId: e.professional_id,
    metadata: e.metadata,
    source,
  };
}

/**
 * The columns an events file's CSV header must have: without one, every row would be rejected
 * alike (a renamed `event_id` column, a `|`-separated file read as one column), so the file is
 * refused as a whole, naming what is missing, as a contacts export without a mapped column is.
 */
export const EVENT_FILE_COLUMNS = {
  requiredColumns: new Map([
    ['event_id', 'the key that makes the event sent once'],
    ['event_type', 'the type of the event'],
  ]),
  requiredOneOf: [{ columns: ['email', 'contact_id'], for: "the event's recipient" }],
} as const satisfies Pick<ReadOptions, 'requiredColumns' | 'requiredOneOf'>;

/** A row of an events file: `event_id` is its key; other columns by their API names. */
export function eventFromRecord(record: FileRecord): NewEvent | RowError {
  const f = record.fields;
  // Only a key of the partner's own makes the same file dropped again a no-op.
  if ((f.event_id ?? '').trim() === '') {
    return {
      line: record.line,
      field: 'event_id',
      reason: 'is missing (the key that makes the event sent once)',
    };
  }
  const event = toNewEvent(
    {
      key: f.event_id,
      email: f.email,
      contact_id: f.contact_id,
      event_type: f.event_type,
      professional_id: f.professional_id,
      metadata: f.metadata,
    },
    'file',
  );
  if (!('field' in event)) return event;
  // Named by the file's column: `key` is no column the partner could look for.
  return { line: record.line, reason: event.reason, field: event.field === 'key' ? 'event_id' : event.field };
}
