import type { EventRule } from '../../config/configFile.js';
import type { ContactRow } from '../contacts/contactRow.js';
import type { NewEvent } from './outboxSql.js';

/**
 * The metadata keys every rule's event sets itself, beside the one named after the rule's column,
 * and what each holds: a rule may not read a column of one of these names (configFile.ts), whose
 * value would overwrite the rule's name, or be overwritten by the contact's external_id.
 */
export const RULE_METADATA_KEYS: ReadonlyMap<string, string> = new Map([
  ['rule', "the rule's name"],
  ['external_id', "the contact's external_id"],
]);

/**
 * The events a CRM row fires under the configured rules. The key is the rule, the contact and the
 * value: a contact whose status becomes `closed` fires once, however often the export is imported.
 * A contact is known by its external_id, or by its email while it has none: once it gains one, the
 * event an earlier export fired under its email is the same event (`sameAs`), not a new one.
 */
export function eventsOfRow(
  fields: Readonly<Record<string, string>>,
  row: ContactRow,
  rules: readonly EventRule[],
): NewEvent[] {
  const events: NewEvent[] = [];
  for (const rule of rules) {
    const value = fields[rule.column]?.trim();
    if (value === undefined || value !== rule.equals) continue;
    const byEmail = `rule:${rule.name}:${row.contact.email.toLowerCase()}:${value}`;
    const key = `rule:${rule.name}:${row.key}:${value}`;
    events.push({
      key,
      email: row.contact.email,
      contactId: null,
      eventType: rule.event_type,
      professionalId: row.contact.professional_id,
      metadata: { rule: rule.name, [rule.column]: value, external_id: row.contact.external_id },
      source: 'rule',
      ...(key === byEmail ? {} : { sameAs: byEmail }),
    });
  }
  return events;
}
