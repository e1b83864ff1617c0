import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { ContactMapping, EventRule } from '../../config/configFile.js';
import { partnerUuid } from '../../partner-api/uuidText.js';
import type { FileRecord, RowError } from '../readRecords.js';

/** A contact as sent to the platform (spec 4.1), from one valid row of the export. */
export interface Contact {
  readonly email: string;
  readonly name: string | null;
  readonly external_id: string | null;
  readonly professional_id: string | null;
}

/** A valid row: its contact, the key it is known by, the hash of what is sent, and its line. */
export interface ContactRow {
  readonly line: number;
  /** `external_id`, else the lower-cased email: what the mirror and the platform match it by. */
  readonly key: string;
  readonly contact: Contact;
  readonly hash: string;
}

const optional = (max: number) =>
  z
    .string()
    .max(max, `must be at most ${max} characters`)
    .transform((v) => (v === '' ? null : v))
    .nullable();

const contactSchema = z.object({
  email: z
    .string({ error: 'is missing' })
    .min(1, 'is missing')
    .max(320, 'must be at most 320 characters')
    .pipe(z.email({ error: 'is not an email address' })),
  name: optional(200),
  external_id: optional(255),
  professional_id: optional(36).pipe(partnerUuid.nullable()),
});

/** The fields of a contact that the push sends cleared when the CRM empties them. */
type ClearableField = 'name' | 'professional_id';

/**
 * The hash of what would be sent: a changed contact has another one. Key order is fixed. A field
 * whose column the record lacks (`absent`) is not sent, and hashes apart from one sent empty: an
 * export that empties it after one without its column is a change, sent cleared. With no field
 * absent, the hash is the one every earlier push recorded.
 */
export function contentHash(contact: Contact, absent: readonly ClearableField[] = []): string {
  const fields = [contact.email, contact.name, contact.external_id, contact.professional_id];
  const canonical = JSON.stringify(absent.length === 0 ? fields : [...fields, { absent }]);
  return createHash('sha256').update(canonical).digest('hex');
}

/**
 * The columns a CSV export must have, with what names each: the email's, those the mapping names,
 * and those the event rules read (a rule whose column is gone would never fire, silently).
 */
export function requiredColumnsOf(
  mapping: ContactMapping,
  rules: readonly EventRule[] = [],
): Map<string, string> {
  const required = new Map<string, string>();
  const fields = new Set<keyof ContactMapping['columns']>(['email', ...mapping.named_columns]);
  for (const field of fields) required.set(mapping.columns[field], `contacts.columns.${field}`);
  for (const rule of rules) {
    if (!required.has(rule.column)) required.set(rule.column, `events.rules ${rule.name}`);
  }
  return required;
}

/**
 * The columns a contacts push reads: the mapping's, named or at their default, and those the event
 * rules read. No other column is sent, so none other can reject a row (readRecords' columnsRead).
 */
export function columnsReadOf(mapping: ContactMapping, rules: readonly EventRule[] = []): Set<string> {
  return new Set([...Object.values(mapping.columns), ...rules.map((rule) => rule.column)]);
}

/** Maps and validates one record: a contact row, or the first reason it cannot be one (which field, why). */
export function toContactRow(record: FileRecord, mapping: ContactMapping): ContactRow | RowError {
  const value = (field: keyof ContactMapping['columns']): string | null => {
    const raw = record.fields[mapping.columns[field]];
    if (raw === undefined) return null;
    const trimmed = mapping.trim ? raw.trim() : raw;
    return field === 'email' && mapping.lowercase_email ? trimmed.toLowerCase() : trimmed;
  };
  if (record.fields[mapping.columns.email] === undefined) {
    return {
      line: record.line,
      field: 'email',
      reason: `column "${mapping.columns.email}" is not in the file`,
    };
  }
  const parsed = contactSchema.safeParse({
    email: value('email') ?? '',
    name: value('name'),
    external_id: value('external_id'),
    professional_id: value('professional_id'),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { line: record.line, field: String(issue.path[0] ?? '(row)'), reason: issue.message };
  }
  const contact = parsed.data;
  const absent = (['name', 'professional_id'] as const).filter(
    (field) => record.fields[mapping.columns[field]] === undefined,
  );
  return {
    line: record.line,
    key: contact.external_id ?? contact.email.toLowerCase(),
    contact,
    hash: contentHash(contact, absent),
  };
}
