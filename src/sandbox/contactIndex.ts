import type { ContactRecord } from './store.js';

/**
 * A company's contacts looked up as the platform matches them — by id, by external_id, by
 * case-insensitive email (the earliest created first, as a scan in creation order would find;
 * several contacts may share one email, each under its own external_id) — in constant time for
 * one email, so a 100,000-row CRM push costs the sandbox no quadratic scan.
 */
export class ContactIndex {
  readonly all: ContactRecord[] = [];
  readonly #byId = new Map<string, ContactRecord>();
  readonly #byExternalId = new Map<string, ContactRecord>();
  readonly #byEmail = new Map<string, ContactRecord[]>();
  readonly #order = new Map<ContactRecord, number>();

  byId(id: string): ContactRecord | undefined {
    return this.#byId.get(id);
  }

  byExternalId(externalId: string): ContactRecord | undefined {
    return this.#byExternalId.get(externalId);
  }

  /** The earliest contact of this email, of those `which` accepts (all when omitted). */
  byEmail(email: string, which: (contact: ContactRecord) => boolean = () => true): ContactRecord | undefined {
    return this.#byEmail.get(email.toLowerCase())?.find(which);
  }

  add(contact: ContactRecord): void {
    this.#order.set(contact, this.all.length);
    this.all.push(contact);
    this.#byId.set(contact.id, contact);
    if (contact.externalId !== null) this.#byExternalId.set(contact.externalId, contact);
    this.#addEmail(contact);
  }

  /** Changes a contact's email and external_id, keeping the lookups in step. */
  update(contact: ContactRecord, change: { email: string; externalId: string | null }): void {
    if (contact.externalId !== null && this.#byExternalId.get(contact.externalId) === contact) {
      this.#byExternalId.delete(contact.externalId);
    }
    const list = this.#byEmail.get(contact.email.toLowerCase()) ?? [];
    list.splice(list.indexOf(contact), 1);
    if (list.length === 0) this.#byEmail.delete(contact.email.toLowerCase());
    contact.email = change.email;
    contact.externalId = change.externalId;
    if (contact.externalId !== null) this.#byExternalId.set(contact.externalId, contact);
    this.#addEmail(contact);
  }

  #addEmail(contact: ContactRecord): void {
    const key = contact.email.toLowerCase();
    const list = this.#byEmail.get(key) ?? [];
    const order = this.#order.get(contact)!;
    let at = list.length;
    while (at > 0 && this.#order.get(list[at - 1]!)! > order) at--;
    list.splice(at, 0, contact);
    this.#byEmail.set(key, list);
  }
}
