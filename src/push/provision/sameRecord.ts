import type { NewLocation } from '../../partner-api/locations.js';
import type { Location } from '../../partner-api/locationsSchema.js';
import type { ProfessionalListItem } from '../../partner-api/professionalsSchema.js';

/** The same text, however it was typed (composed or decomposed accents, outer spaces). */
export function sameText(a: string | null | undefined, b: string | null | undefined): boolean {
  return (a ?? '').normalize('NFC').trim() === (b ?? '').normalize('NFC').trim();
}

/**
 * Whether a listed location is the one `sent` describes: its name and every address field as sent
 * (a field not sent is empty on the platform). `active` is left out: it is a state the company may
 * change since, not part of which location it is.
 */
export function describesLocation(sent: NewLocation, location: Location): boolean {
  const { address } = location;
  return (
    sameText(sent.name, location.name) &&
    sameText(sent.address_1, address.line1) &&
    sameText(sent.address_2, address.line2) &&
    sameText(sent.city, address.city) &&
    sameText(sent.state, address.state) &&
    sameText(sent.zip, address.zip)
  );
}

/** Whether a listed professional bears the name sent: the email, which would tell, is never returned. */
export function describesProfessional(
  sent: { readonly first_name: string; readonly last_name: string },
  professional: ProfessionalListItem,
): boolean {
  return (
    sameText(sent.first_name, professional.first_name) && sameText(sent.last_name, professional.last_name)
  );
}

/**
 * The records listed after a create whose answer was lost that it may have made: those matching
 * what it sent that were not listed before it was sent, and that no other row of the file holds.
 */
export function madeSince<T extends { readonly id: string | number; readonly slug: string }>(
  before: readonly T[],
  after: readonly T[],
  matches: (record: T) => boolean,
  heldElsewhere: (record: T) => boolean,
): T[] {
  const earlier = new Set(before.map((r) => r.id));
  return after.filter((r) => matches(r) && !earlier.has(r.id) && !heldElsewhere(r));
}
