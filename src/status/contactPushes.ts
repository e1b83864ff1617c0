import type { Db } from '../db/connect.js';
import { countContactsByOutcome, type PushRecord, readRecentPushes } from '../push/contacts/contactsSql.js';
import { alignColumns } from './alignColumns.js';
import { hasTables } from './statusSql.js';

/** The contacts side of `status`: where the contacts stand, and the last pushes. */
export interface ContactsStatus {
  /** Contacts by outcome of their last push: sent, failed, pending. */
  contacts: Record<string, number>;
  last_pushes: PushRecord[];
}

const RECENT = 5;

/** Null while the tables do not exist yet (migrations pending). */
export async function readContactsStatus(db: Db): Promise<ContactsStatus | null> {
  if (!(await hasTables(db.knex, db, ['contacts', 'contact_push_log']))) return null;
  return {
    contacts: await countContactsByOutcome(db.knex, db),
    last_pushes: await readRecentPushes(db.knex, db, RECENT),
  };
}

const OUTCOMES = ['sent_created', 'sent_updated', 'unchanged', 'rejected', 'replaced', 'failed'] as const;

export function formatContactsStatus(status: ContactsStatus | null | undefined): string[] {
  if (!status) return [];
  const { sent = 0, failed = 0, pending = 0 } = status.contacts;
  const lines = [
    'contacts:',
    `  on the platform ${sent} (failed ${failed}, pending ${pending}; table contacts)`,
  ];
  if (status.last_pushes.length === 0) return [...lines, '  (no push yet)'];
  lines.push('  last pushes (table contact_push_log):');
  const rows = status.last_pushes.map((p) => [
    p.at,
    p.file,
    ...OUTCOMES.map((o) => `${o}=${p.outcomes[o] ?? 0}`),
  ]);
  return [...lines, ...alignColumns(rows).map((l) => `    ${l}`)];
}
