import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { partner } from './helpers.js';

type Call = ReturnType<typeof partner>;

describe('contacts and events', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  let api: Call;

  beforeAll(async () => {
    sandbox = await testSandbox();
    ({ control } = sandbox);
    api = partner(sandbox, sandbox.apiKey);
  });
  afterAll(() => sandbox.close());

  it('upserts on external_id first, then email case-insensitively when either side has no external_id, else creates', async () => {
    const created = await api('POST', '/contacts', {
      email: 'Kim@Example.com',
      name: 'Kim',
      external_id: 'crm-1',
    });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      created: true,
      contact: { email: 'Kim@Example.com', name: 'Kim', external_id: 'crm-1', professional_id: null },
    });
    const id = created.json.contact.id;

    const byEmail = await api('POST', '/contacts', { email: 'kim@example.COM', name: 'Kim Lee' });
    expect(byEmail.status).toBe(200);
    expect(byEmail.json.contact).toMatchObject({ id, name: 'Kim Lee', external_id: 'crm-1' });

    const byExternal = await api('POST', '/contacts', { email: 'kim.new@example.com', external_id: 'crm-1' });
    expect(byExternal.status).toBe(200);
    expect(byExternal.json.contact).toMatchObject({ id, email: 'kim.new@example.com', name: 'Kim Lee' });

    // A contact known by its email alone (an event's) takes the external_id of the first upsert naming it.
    await api('POST', '/events', { email: 'Lee@Example.com', event_type: 'matter.closed' });
    const attached = await api('POST', '/contacts', { email: 'lee@example.com', external_id: 'crm-4' });
    expect(attached.status).toBe(200);
    expect(attached.json.contact).toMatchObject({ email: 'lee@example.com', external_id: 'crm-4' });

    const other = await api('POST', '/contacts', { email: 'someone@example.com', external_id: 'crm-3' });
    expect(other.status).toBe(201);
    expect(other.json.contact.id).not.toBe(id);

    const truth = await control.truth(sandbox.companyId);
    expect(truth.contacts).toHaveLength(3);
  });

  it('keeps each external_id its own contact: another external_id with a known email is another contact (spec 4.1)', async () => {
    const first = await api('POST', '/contacts', {
      email: 'Pat@Example.com',
      name: 'Pat',
      external_id: 'hh-1',
    });
    expect(first.status).toBe(201);
    // A second CRM record sharing the household's email: upserted by its own key, not merged.
    const second = await api('POST', '/contacts', {
      email: 'pat@example.com',
      name: 'Sam',
      external_id: 'hh-2',
    });
    expect(second.status).toBe(201);
    expect(second.json.contact).toMatchObject({ name: 'Sam', external_id: 'hh-2' });
    expect(second.json.contact.id).not.toBe(first.json.contact.id);

    // Each key upserts its own contact, again and again, and neither takes the other's key.
    const again = await api('POST', '/contacts', {
      email: 'pat@example.com',
      name: 'Pat Lee',
      external_id: 'hh-1',
    });
    expect(again.status).toBe(200);
    expect(again.json.contact).toMatchObject({
      id: first.json.contact.id,
      name: 'Pat Lee',
      external_id: 'hh-1',
    });
    const contacts = (await control.truth(sandbox.companyId)).contacts.filter(
      (c) => c.email.toLowerCase() === 'pat@example.com',
    );
    expect(contacts.map((c) => [c.external_id, c.name])).toEqual([
      ['hh-1', 'Pat Lee'],
      ['hh-2', 'Sam'],
    ]);

    // Without an external_id, the email finds the earliest of them, as before.
    const byEmail = await api('POST', '/contacts', { email: 'PAT@example.com' });
    expect(byEmail.status).toBe(200);
    expect(byEmail.json.contact.id).toBe(first.json.contact.id);
  });

  it('requires email, validates professional_id, and scopes contacts per company', async () => {
    for (const body of [
      {},
      { name: 'x' },
      { email: 'nope' },
      { email: 'a@b.co', professional_id: 'ghost' },
    ]) {
      const answer = await api('POST', '/contacts', body);
      expect(answer.status, JSON.stringify(body)).toBe(422);
      expect(answer.json.error).toEqual(expect.any(String));
    }
    const pro = (
      await api('POST', '/professionals', { first_name: 'P', last_name: 'Q', email: 'pq@example.com' })
    ).json;
    const linked = await api('POST', '/contacts', { email: 'linked@example.com', professional_id: pro.id });
    expect(linked.json.contact.professional_id).toBe(pro.id);

    const { api_key, company_id } = await control.createCompany();
    const again = await partner(sandbox, api_key)('POST', '/contacts', { email: 'linked@example.com' });
    expect(again.status).toBe(201);
    expect((await control.truth(company_id)).contacts).toHaveLength(1);
  });

  it('queues events, creating the contact for an unknown email', async () => {
    const answer = await api('POST', '/events', {
      email: 'Fresh@Example.com',
      event_type: 'matter.closed',
      metadata: { matter: 42, tags: ['a'] },
    });
    expect(answer.status).toBe(202);
    expect(answer.json).toEqual({ id: expect.any(String), status: 'queued' });
    const truth = await control.truth(sandbox.companyId);
    const contact = truth.contacts.find((c) => c.email === 'Fresh@Example.com');
    expect(contact).toBeDefined();
    expect(truth.events.at(-1)).toMatchObject({
      id: answer.json.id,
      contact_id: contact!.id,
      event_type: 'matter.closed',
      metadata: { matter: 42, tags: ['a'] },
      professional_id: null,
    });

    const again = await api('POST', '/events', { email: 'fresh@example.com', event_type: 'visit.completed' });
    expect(again.status).toBe(202);
    const byId = await api('POST', '/events', {
      contact_id: contact!.id,
      event_type: 'custom_event.v2.done',
    });
    expect(byId.status).toBe(202);
    const after = await control.truth(sandbox.companyId);
    expect(after.contacts.filter((c) => c.email.toLowerCase() === 'fresh@example.com')).toHaveLength(1);
    expect(after.events.slice(-2).map((e) => e.contact_id)).toEqual([contact!.id, contact!.id]);
  });

  it('answers 422 for invalid events', async () => {
    const cases = [
      {},
      { event_type: 'matter.closed' },
      { email: 'a@b.co' },
      { email: 'a@b.co', event_type: 'has spaces' },
      { email: 'a@b.co', event_type: 'x.y', metadata: [1, 2] },
      { email: 'a@b.co', event_type: 'x.y', metadata: 'text' },
      { contact_id: 'ghost', event_type: 'x.y' },
      { email: 'a@b.co', event_type: 'x.y', professional_id: 'ghost' },
    ];
    for (const body of cases) {
      const answer = await api('POST', '/events', body);
      expect(answer.status, JSON.stringify(body)).toBe(422);
      expect(answer.json.error).toEqual(expect.any(String));
    }
  });
});
