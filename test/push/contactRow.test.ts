import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/configFile.js';
import { ConfigError } from '../../src/config/schema.js';
import { contactBody } from '../../src/partner-api/contacts.js';
import { columnsReadOf, requiredColumnsOf, toContactRow } from '../../src/push/contacts/contactRow.js';
import { planPush } from '../../src/push/contacts/planPush.js';
import { GIVE_UP_AFTER_PUSHES, isGivenUp } from '../../src/push/contacts/unavailableStreak.js';
import { eventsOfRow } from '../../src/push/events/contactRules.js';
import { readRecords } from '../../src/push/readRecords.js';

const mapping = loadConfigFile(undefined).contacts;
const row = (fields: Record<string, string>, line = 2) => toContactRow({ line, fields }, mapping);

describe('toContactRow', () => {
  it('keys a contact by external_id, else by its lower-cased email, and hashes what is sent', () => {
    const a = row({ email: ' Ana@Example.com ', name: 'Ana', external_id: 'crm-1', professional_id: '' });
    expect(a).toMatchObject({
      key: 'crm-1',
      contact: { email: 'ana@example.com', name: 'Ana', external_id: 'crm-1', professional_id: null },
    });
    const b = row({ email: 'Bo@Example.com', name: '' });
    expect(b).toMatchObject({ key: 'bo@example.com', contact: { name: null, external_id: null } });
    const changed = row({ email: ' Ana@Example.com ', name: 'Ana B.', external_id: 'crm-1' });
    expect('hash' in a && 'hash' in changed && a.hash !== changed.hash).toBe(true);
  });

  it('takes any UUID PostgreSQL stores as a professional_id, as written', () => {
    // Version 0 and variant digit 0: refused by z.uuid(), a UUID to PostgreSQL and the platform.
    const id = 'A0EEBC99-9C0B-0EF8-0BB6-6BB9BD380A11';
    expect(row({ email: 'a@example.com', professional_id: id })).toMatchObject({
      contact: { professional_id: id },
    });
  });

  it.each([
    [{ email: '' }, 'email', 'is missing'],
    [{ email: 'not-an-email' }, 'email', 'is not an email address'],
    [{ email: 'a@example.com', professional_id: 'p-1' }, 'professional_id', 'is not a UUID'],
    [{ email: 'a@example.com', name: 'x'.repeat(201) }, 'name', 'must be at most 200 characters'],
    [{ name: 'no email column' }, 'email', 'column "email" is not in the file'],
  ])('rejects %o on %s: %s', (fields, field, reason) => {
    expect(row(fields, 7)).toEqual({ line: 7, field, reason });
  });
});

describe('columns named like what Object.prototype has', () => {
  /** Reads a JSON Lines export as a contacts push does: each record a contact row or a rejection, and the events its rules fire. */
  async function pushRead(yaml: string, jsonl: string) {
    const dir = await mkdtemp(join(tmpdir(), 'rm-proto-'));
    await writeFile(join(dir, 'map.yaml'), yaml);
    await writeFile(join(dir, 'export.jsonl'), jsonl);
    const config = loadConfigFile(join(dir, 'map.yaml'));
    const read = {
      requiredColumns: requiredColumnsOf(config.contacts, config.events.rules),
      columnsRead: columnsReadOf(config.contacts, config.events.rules),
    };
    const out: unknown[] = [];
    for await (const item of readRecords(join(dir, 'export.jsonl'), read)) {
      if ('error' in item) {
        out.push(item.error);
        continue;
      }
      const row = toContactRow(item.record, config.contacts);
      out.push(
        'key' in row ? { row, events: eventsOfRow(item.record.fields, row, config.events.rules) } : row,
      );
    }
    return out;
  }

  // A JSON Lines object may leave out any key: a mapped column it lacks read Object.prototype's
  // function, whose trim() threw a TypeError, which failed the whole file on every run.
  it('reads a mapped column a row lacks as missing, not as a function of Object.prototype', async () => {
    const yaml = [
      'contacts:',
      '  columns: { external_id: constructor, name: toString }',
      'events:',
      '  rules: [{ name: flag, column: hasOwnProperty, equals: "yes", event_type: contact.flagged }]',
      '',
    ].join('\n');
    const jsonl = [
      '{"email":"a@example.com"}',
      '{"email":"b@example.com","constructor":"crm-2","toString":"Bo","hasOwnProperty":"yes"}',
    ].join('\n');
    expect(await pushRead(yaml, jsonl)).toEqual([
      {
        row: expect.objectContaining({
          key: 'a@example.com',
          contact: { email: 'a@example.com', name: null, external_id: null, professional_id: null },
        }),
        events: [],
      },
      {
        row: expect.objectContaining({
          key: 'crm-2',
          contact: { email: 'b@example.com', name: 'Bo', external_id: 'crm-2', professional_id: null },
        }),
        events: [expect.objectContaining({ eventType: 'contact.flagged', email: 'b@example.com' })],
      },
    ]);
  });

  it('fires no event of a rule whose column a row lacks', async () => {
    const yaml =
      'events:\n  rules: [{ name: flag, column: valueOf, equals: "yes", event_type: contact.flagged }]\n';
    const jsonl = '{"email":"a@example.com"}\n{"email":"b@example.com","valueOf":"yes"}\n';
    expect(await pushRead(yaml, jsonl)).toEqual([
      { row: expect.objectContaining({ key: 'a@example.com' }), events: [] },
      {
        row: expect.objectContaining({ key: 'b@example.com' }),
        events: [
          expect.objectContaining({
            key: 'rule:flag:b@example.com:yes',
            metadata: { rule: 'flag', valueOf: 'yes', external_id: null },
          }),
        ],
      },
    ]);
  });

  it('rejects a row without the email column the mapping names, as any row without it', async () => {
    const jsonl = '{"email":"a@example.com"}\n{"constructor":"b@example.com"}\n';
    expect(await pushRead('contacts:\n  columns: { email: constructor }\n', jsonl)).toEqual([
      { line: 1, field: 'email', reason: 'column "constructor" is not in the file' },
      expect.objectContaining({ row: expect.objectContaining({ key: 'b@example.com' }) }),
    ]);
  });
});

describe('planPush', () => {
  it('sends what is new, changed or failed last time; skips what is unchanged unless full', () => {
    expect(planPush(undefined, 'h1', { full: false })).toBe('create');
    expect(planPush({ hash: 'h0', sent: true }, 'h1', { full: false })).toBe('update');
    expect(planPush({ hash: 'h1', sent: false }, 'h1', { full: false })).toBe('retry');
    expect(planPush({ hash: 'h1', sent: true }, 'h1', { full: false })).toBe('unchanged');
    expect(planPush({ hash: 'h1', sent: true }, 'h1', { full: true })).toBe('update');
  });

  it('holds a contact given up unchanged, sending it again once changed or on a full push', () => {
    const givenUp = { hash: 'h1', sent: false, givenUp: true };
    expect(planPush(givenUp, 'h1', { full: false })).toBe('given_up');
    expect(planPush(givenUp, 'h2', { full: false })).toBe('update');
    expect(planPush(givenUp, 'h1', { full: true })).toBe('retry');
  });
});

describe('isGivenUp', () => {
  it('tells a contact given up by its failed outcome and a streak at the limit', () => {
    const streak = (pushes: number) => ({ pushes, since: new Date() });
    expect(isGivenUp('failed', streak(GIVE_UP_AFTER_PUSHES))).toBe(true);
    expect(isGivenUp('failed', streak(GIVE_UP_AFTER_PUSHES - 1))).toBe(false);
    // A push cut short after a full push began to send it again: sent again, not held.
    expect(isGivenUp('pending', streak(GIVE_UP_AFTER_PUSHES))).toBe(false);
  });
});

describe('a contact as sent', () => {
  it('hashes a contact as every earlier version did: an upgrade re-sends none', () => {
    const a = row({ email: 'a@example.com', name: '', external_id: 'k-1', professional_id: '' });
    expect(a).toMatchObject({ hash: '00240d9b08000860585b0ad934d3f0861f837470b4131fb9d8a526ff325821e3' });
    const b = row({
      email: 'a@example.com',
      name: 'Ann',
      external_id: 'k-1',
      professional_id: '3f2504e0-4f89-41d3-9a0c-0305e82c3301',
    });
    expect(b).toMatchObject({ hash: '8a6da26f88ab1c4f0f3ce9cd9afbe845066ba68646d40eb554bc54fdb15271c5' });
  });

  it('leaves out the fields without a value, or sends cleared those emptied since the last push', () => {
    const contact = { email: 'a@example.com', name: null, external_id: 'k-1', professional_id: null };
    expect(contactBody(contact)).toEqual({ email: 'a@example.com', external_id: 'k-1' });
    expect(contactBody(contact, { clear: { name: true, professional_id: true } })).toEqual({
      email: 'a@example.com',
      name: '',
      external_id: 'k-1',
      professional_id: null,
    });
    // Only what was emptied: a field never set stays out.
    expect(contactBody(contact, { clear: { name: true } })).toEqual({
      email: 'a@example.com',
      name: '',
      external_id: 'k-1',
    });
    // A field with a value is sent as it is, whatever `clear` says.
    expect(contactBody({ ...contact, name: 'Ann' }, { clear: { name: true } })).toMatchObject({
      name: 'Ann',
    });
    // The upsert key is never sent cleared: a contact without one is keyed by its email.
    expect(
      contactBody({ ...contact, external_id: null }, { clear: { name: true, professional_id: true } }),
    ).not.toHaveProperty('external_id');
  });
});

describe('the configuration file', () => {
  it('maps columns from YAML and names the key of a bad value', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-cfg-'));
    await writeFile(
      join(dir, 'ok.yaml'),
      'contacts:\n  columns:\n    email: E-mail\n    external_id: CRM ID\n',
    );
    expect(loadConfigFile(join(dir, 'ok.yaml')).contacts.columns).toEqual({
      email: 'E-mail',
      name: 'name',
      external_id: 'CRM ID',
      professional_id: 'professional_id',
    });
    await writeFile(join(dir, 'bad.yaml'), 'contacts:\n  columns:\n    email: 42\n');
    expect(() => loadConfigFile(join(dir, 'bad.yaml'))).toThrow(ConfigError);
    expect(() => loadConfigFile(join(dir, 'bad.yaml'))).toThrow(/contacts\.columns\.email: /);
    await writeFile(join(dir, 'typo.yaml'), 'contacts:\n  colums: {}\n');
    expect(() => loadConfigFile(join(dir, 'typo.yaml'))).toThrow(/contacts: /);
  });

  it('requires of a CSV header the email column, the columns it names, and those rules read', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rm-cfg-'));
    await writeFile(
      join(dir, 'named.yaml'),
      [
        'contacts:',
        '  columns: { external_id: CRM ID, name: Full name }',
        'events:',
        '  rules: [{ name: closed, column: Stage, equals: Closed, event_type: matter.closed }]',
        '',
      ].join('\n'),
    );
    const named = loadConfigFile(join(dir, 'named.yaml'));
    expect(requiredColumnsOf(named.contacts, named.events.rules)).toEqual(
      new Map([
        ['email', 'contacts.columns.email'],
        ['CRM ID', 'contacts.columns.external_id'],
        ['Full name', 'contacts.columns.name'],
        ['Stage', 'events.rules closed'],
      ]),
    );
    // Without a file, only the email's: an export without external_id is keyed by email.
    expect(requiredColumnsOf(mapping)).toEqual(new Map([['email', 'contacts.columns.email']]));
  });
});
