import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/configFile.js';
import { ConfigError } from '../../src/config/schema.js';
import { toContactRow } from '../../src/push/contacts/contactRow.js';
import { eventsOfRow } from '../../src/push/events/contactRules.js';
import { enqueueEvents } from '../../src/push/events/outboxSql.js';
import { freshDb } from '../helpers/db.js';

const REFUSED = (i: number, column: string, holds: string) =>
  `events.rules.${i}.column: "${column}" is a key the rule's events set in their metadata themselves (to ${holds}): the column's value would collide with it, so a rule cannot read a column named rule or external_id`;

/**
 * A rule's event carries `{ rule, [column]: value, external_id }`: a rule reading a column named
 * `rule` or `external_id` would send something else than the row, for every contact. The
 * configuration file is refused at start-up, naming the rule, before anything is read or sent.
 */
describe('rules reading a column named like a key their events set themselves', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rm-contact-rules-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const load = async (rules: string) => {
    const path = join(dir, 'config.yaml');
    await writeFile(path, `events:\n  rules:\n${rules}`);
    return () => loadConfigFile(path);
  };
  const ruleLine = (name: string, column: string) =>
    `    - { name: ${name}, column: ${column}, equals: "yes", event_type: matter.closed }\n`;

  it.each([
    ['rule', "the rule's name"],
    ['external_id', "the contact's external_id"],
  ])('refuses a rule on column %s, naming the rule and what the key holds', async (column, holds) => {
    const loading = await load(ruleLine('first', 'status') + ruleLine('second', column));
    expect(loading).toThrow(ConfigError);
    expect(loading).toThrow(REFUSED(1, column, holds));
  });

  it('takes any other column, one differing only in case included, and fires as before', async () => {
    const loading = await load(
      ruleLine('by-status', 'status') + ruleLine('b', 'Rule') + ruleLine('c', 'External_ID'),
    );
    const config = loading();
    const fields = { email: 'a@example.com', external_id: 'crm-1', Rule: 'no', status: 'yes' };
    const row = toContactRow({ line: 2, fields }, config.contacts);
    if (!('key' in row)) throw new Error('the row is valid');
    expect(eventsOfRow(fields, row, config.events.rules)).toEqual([
      {
        key: 'rule:by-status:crm-1:yes',
        email: 'a@example.com',
        contactId: null,
        eventType: 'matter.closed',
        professionalId: null,
        metadata: { rule: 'by-status', status: 'yes', external_id: 'crm-1' },
        source: 'rule',
        sameAs: 'rule:by-status:a@example.com:yes',
      },
    ]);
  });
});

/**
 * A contact known by its email until the CRM gives it an external_id: the export after that keys
 * it by the id, and its rule's event, already enqueued under the email, must not go out again to
 * the same person. Another contact of its own id still fires, and so does the same rule's other
 * value.
 */
describe('a rule event of a contact that gained an external_id', () => {
  const rules = [{ name: 'closed', column: 'status', equals: 'closed', event_type: 'matter.closed' }];
  const eventsOf = (fields: Record<string, string>) => {
    const row = toContactRow({ line: 2, fields }, loadConfigFile(undefined).contacts);
    if (!('key' in row)) throw new Error('the row is valid');
    return eventsOfRow(fields, row, rules);
  };

  it('is not enqueued again under the id; another contact still fires', async () => {
    const db = await freshDb();
    try {
      const enqueue = (fields: Record<string, string>) => enqueueEvents(db.knex, db, eventsOf(fields));
      expect(await enqueue({ email: 'Ann@Example.com', status: 'closed' })).toBe(1);
      expect(await enqueue({ email: 'ann@example.com', external_id: 'crm-9', status: 'closed' })).toBe(0);
      expect(await enqueue({ email: 'ann@example.com', external_id: 'crm-9', status: 'closed' })).toBe(0);
      expect(await enqueue({ email: 'bob@example.com', external_id: 'crm-10', status: 'closed' })).toBe(1);
      const keys = await db.knex(db.table('events_outbox')).orderBy('id').pluck('idempotency_key');
      expect(keys).toEqual(['rule:closed:ann@example.com:closed', 'rule:closed:crm-10:closed']);
    } finally {
      await db.close();
    }
  });
});
