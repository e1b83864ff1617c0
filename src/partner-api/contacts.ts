import { z } from 'zod';
import type { Contact } from '../push/contacts/contactRow.js';
import { answerText, type HttpClient } from './http.js';

/** The contact's id and whether it was created, when they can be found in an answer. */
const upsertAnswerOf = (body: unknown) => {
  const record = (body ?? {}) as { contact?: { id?: unknown }; id?: unknown; created?: unknown };
  const id = record.contact?.id ?? record.id;
  return {
    id: answerText(id),
    created: typeof record.created === 'boolean' ? record.created : null,
  };
};

// Spec 4.1: "Response body and status codes: not shown". Whatever comes back is accepted unless
// it says the contact was refused (`{"success": false, "error": …}`), or is not the platform's
// answer at all (an HTML page of a proxy in front of it: http.ts sends such a request again when
// it is an upsert by external_id); the contact's id and whether it was created are taken when
// they can be found. An empty body, `OK` or `Created` is the platform's: a platform answering
// every upsert so must not have every contact sent again at every push.
const upsertAnswerSchema = z.unknown().transform(upsertAnswerOf);

export interface UpsertOptions {
  /**
   * The fields the CRM has emptied since the mirror last recorded a value of them, sent cleared:
   * the platform keeps a field a body leaves out, so a name removed in the CRM would stay on the
   * platform, recorded as sent. Only those: a field never set is left out as before, so a
   * platform that refused an empty name or a null professional would refuse no other contact.
   */
  readonly clear?: { readonly name?: boolean; readonly professional_id?: boolean };
}

export interface ContactsApi {
  /**
   * Creates or updates a contact (spec 4.1). With an external_id the platform upserts by it, so a
   * lost answer may be retried; without one, a request whose answer was lost is not repeated.
   */
  upsert(
    contact: Contact,
    signal?: AbortSignal,
    options?: UpsertOptions,
  ): Promise<{ id: string | null; created: boolean | null }>;
}

/**
 * The body of a contact's upsert. A field without a value is left out, or sent cleared when named
 * in `clear`: the name as "" (spec 4.1 types it a string), the professional as null (it is a
 * UUID: "" is none, and the sandbox refuses it). The external_id, the upsert key, is never sent
 * cleared: a contact without one is another contact (keyed by its email), not this one changed.
 */
export function contactBody(contact: Contact, options: UpsertOptions = {}): Record<string, string | null> {
  const body: Record<string, string | null> = { email: contact.email };
  if (contact.name !== null) body.name = contact.name;
  else if (options.clear?.name) body.name = '';
  if (contact.external_id !== null) body.external_id = contact.external_id;
  if (contact.professional_id !== null) body.professional_id = contact.professional_id;
  else if (options.clear?.professional_id) body.professional_id = null;
  return body;
}

export function makeContactsApi(http: HttpClient): ContactsApi {
  return {
    upsert: (contact, signal, options) => {
      const idempotent = contact.external_id !== null;
      return http.request('POST', '/contacts', {
        body: contactBody(contact, options),
        schema: upsertAnswerSchema,
        refusalInBody: true,
        idempotent,
        signal,
      });
    },
  };
}
