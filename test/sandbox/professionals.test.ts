import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { partner } from './helpers.js';

type Call = ReturnType<typeof partner>;

describe('professionals', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  let api: Call;

  beforeAll(async () => {
    sandbox = await testSandbox({ surveyDelayMs: 200 });
    ({ control } = sandbox);
    api = partner(sandbox, sandbox.apiKey);
  });
  afterAll(() => sandbox.close());

  it('creates with 201 and location_id, never returns the email, records the invite', async () => {
    const location = (await api('POST', '/locations', { name: 'HQ' })).json;
    const created = await api('POST', '/professionals', {
      first_name: 'Ada',
      last_name: 'Lovelace',
      email: 'Ada@Example.com',
      location_id: location.id,
    });
    expect(created.status).toBe(201);
    expect(created.json).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      slug: 'ada-lovelace',
      first_name: 'Ada',
      last_name: 'Lovelace',
      active: true,
      location_id: location.id,
      profile_url: expect.stringMatching(/^https:\/\//),
      default_survey_url: null,
      created_at: expect.stringMatching(/Z$/),
    });
    const single = await api('GET', '/professionals/ada-lovelace');
    expect(single.json.location_id).toBe(location.id);
    expect(JSON.stringify(single.json)).not.toMatch(/example\.com/i);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect((await api('GET', '/professionals/ada-lovelace')).json.default_survey_url).toMatch(/^https:\/\//);
    const truth = await control.truth(sandbox.companyId);
    expect(truth.invites).toEqual([
      { email: 'Ada@Example.com', professional_id: created.json.id, sent_at: expect.any(String) },
    ]);
  });

  it('answers 409 for an email that exists anywhere on the platform (case-insensitive)', async () => {
    await api('POST', '/professionals', { first_name: 'Bo', last_name: 'Dee', email: 'bo@example.com' });
    const again = await api('POST', '/professionals', {
      first_name: 'B',
      last_name: 'D',
      email: 'BO@example.com',
    });
    expect(again.status).toBe(409);
    expect(again.json).toEqual({ error: 'A user with this email already exists' });
    const { api_key } = await control.createCompany();
    const elsewhere = await partner(sandbox, api_key)('POST', '/professionals', {
      first_name: 'Bo',
      last_name: 'Dee',
      email: 'bo@example.com',
    });
    expect(elsewhere.status).toBe(409);
  });

  it('auto-generates, de-duplicates and validates slugs', async () => {
    const make = (n: number, extra: object = {}) =>
      api('POST', '/professionals', {
        first_name: 'Jo',
        last_name: 'Núñez',
        email: `jo${n}@example.com`,
        ...extra,
      });
    expect((await make(1)).json.slug).toBe('jo-nunez');
    expect((await make(2)).json.slug).toBe('jo-nunez-2');
    expect((await make(3, { slug: 'dr-jo' })).json.slug).toBe('dr-jo');
    const bad = await make(4, { slug: 'Dr_Jo' });
    expect(bad.status).toBe(422);
    expect(bad.json.error).toMatch(/slug/);
  });

  it('answers 422 for invalid input and a foreign location_id', async () => {
    const { api_key } = await control.createCompany();
    const foreign = (await partner(sandbox, api_key)('POST', '/locations', { name: 'Theirs' })).json;
    const cases = [
      {},
      { first_name: 'A', last_name: 'B' },
      { first_name: 'A', last_name: 'B', email: 'not-an-email' },
      { first_name: '', last_name: 'B', email: 'x1@example.com' },
      { first_name: 'A', last_name: 'B', email: 'x2@example.com', location_id: 'one' },
      { first_name: 'A', last_name: 'B', email: 'x3@example.com', location_id: foreign.id },
      { first_name: 'A', last_name: 'B', email: 'x4@example.com', location_id: 999_999 },
    ];
    for (const body of cases) {
      const answer = await api('POST', '/professionals', body);
      expect(answer.status, JSON.stringify(body)).toBe(422);
      expect(answer.json.error).toEqual(expect.any(String));
    }
    // A refused creation does not reserve the email.
    expect(
      (await api('POST', '/professionals', { first_name: 'A', last_name: 'B', email: 'x3@example.com' }))
        .status,
    ).toBe(201);
  });

  it('lists active when active is omitted or true, inactive for false; items have no location_id', async () => {
    const { api_key } = await control.createCompany();
    const call = partner(sandbox, api_key);
    for (let i = 0; i < 5; i++) {
      await call('POST', '/professionals', {
        first_name: 'On',
        last_name: `${i}`,
        email: `on${i}@list.test`,
      });
    }
    await call('POST', '/professionals', {
      first_name: 'Off',
      last_name: 'X',
      email: 'off@list.test',
      active: false,
    });
    const all: Array<Record<string, unknown>> = [];
    let cursor: string | null = null;
    do {
      const page = await call('GET', `/professionals?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      all.push(...page.json.professionals);
      cursor = page.json.pagination.next_cursor;
    } while (cursor);
    expect(all.map((p) => p.last_name)).toEqual(['0', '1', '2', '3', '4']);
    for (const p of all) expect(p).not.toHaveProperty('location_id');
    expect((await call('GET', '/professionals?active=true')).json.professionals).toHaveLength(5);
    const inactive = await call('GET', '/professionals?active=false');
    expect(inactive.json.professionals.map((p: { first_name: string }) => p.first_name)).toEqual(['Off']);
    expect((await call('GET', '/professionals?active=nope')).status).toBe(422);
    expect((await call('GET', '/professionals?limit=101')).status).toBe(422);
  });

  it('answers 404 for an unknown slug or another company’s slug', async () => {
    await api('POST', '/professionals', { first_name: 'Solo', last_name: 'Mine', email: 'solo@example.com' });
    const { api_key } = await control.createCompany();
    expect((await partner(sandbox, api_key)('GET', '/professionals/solo-mine')).status).toBe(404);
    expect((await api('GET', '/professionals/solo-mine')).status).toBe(200);
    expect((await api('GET', '/professionals/ghost')).status).toBe(404);
  });
});
