import { z } from 'zod';

/**
 * A UUID in the one form the platform and PostgreSQL print: 8-4-4-4-12 hex digits, in either case,
 * with any version and variant digits. Not `z.uuid()`: it refuses version and variant digits
 * outside RFC 9562, which PostgreSQL's uuid type stores all the same, so such a record would be
 * quarantined for good. Typed by a partner (a CRM export, a file of events), a UUID is kept as
 * written: its case is part of what was hashed and sent before, and changing it would send a
 * contact again.
 */
const UUID_FORMAT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A UUID typed by a partner, kept as written (see above). */
export const partnerUuid = z.string().regex(UUID_FORMAT, 'is not a UUID');

/**
 * An id the spec types as UUID, returned in lower case: PostgreSQL folds the case, so one id in two
 * cases would pass a dedupe by text and then fail a whole write group (ON CONFLICT cannot affect a
 * row twice).
 */
export const uuidText = z
  .string()
  .regex(UUID_FORMAT, 'must be a UUID (8-4-4-4-12 hex digits)')
  .overwrite((id) => id.toLowerCase());
