import { z } from 'zod';
import type { Contact } from '../push/contacts/contactRow.js';
import { answerText, type HttpClient } from './http.js';

// Spec 4.1: "Response body and status codes: not shown". Whatever comes back is accepted unless
// it says the contact was refused (`{"success": false, "error": …}`); the contact's id and
// whether it was created are taken when they can be found.
const upsertAnswerSchema = z.unknown().transform((body) => {
  const record = (body ?? {}) as { contact?: { id?: unknown }; id?: unknown; created?: unknown };
  const id = record.contact?.id ?? record.id;
  return {
    id: answerText(id),
    created: typeof record.created === 'boolean' ? record.created : null,
  };
});

export interface ContactsApi {
  /**
   * Creates or updates a contact (spec 4.1). With an external_id the platform upserts by it, so a
   * lost answer may be retried; without one, a request whose answer was lost is not repeated.
   */
  upsert(contact: Contact, signal?: AbortSignal): Promise<{ id: string | null; created: boolean | null }>;
}

export function makeContactsApi(http: HttpClient): ContactsApi {
  return {
    upsert: (contact, signal) =>
      http.request('POST', '/contacts', {
        body: Object.fromEntries(Object.entries(contact).filter(([, v]) => v !== null)),
        schema: upsertAnswerSchema,
        refusalInBody: true,
        idempotent: contact.external_id !== null,
        signal,
      }),
  };
}
