import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { partner } from './helpers.js';

type Call = ReturnType<typeof partner>;

describe('locations', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  let api: Call;

  beforeAll(async () => {
    sandbox = await testSandbox({ surveyDelayMs: 300 });
    ({ control } = sandbox);
    api = partner(sandbox, sandbox.apiKey);
  });
  afterAll(() => sandbox.close());

  it('creates with 201, maps address_1/2 to address.line1/2, and provisions the survey later', async () => {
    const created = await api('POST', '/locations', {
      name: 'Downtown Office',
      address_1: '1 Main St',
      address_2: 'Suite 5',
      city: 'Springfield',
      state: 'IL',
      zip: '62701',
    });
    expect(created.status).toBe(201);
    expect(created.json).toEqual({
      id: expect.any(Number),
      slug: 'downtown-office',
      name: 'Downtown Office',
      active: true,
      address: { line1: '1 Main St', line2: 'Suite 5', city: 'Springfield', state: 'IL', zip: '62701' },
      profile_url: expect.stringMatching(/^https:\/\//),
      default_survey_url: null,
      created_at: expect.stringMatching(/Z$/),
    });
    expect(Number.isInteger(created.json.id)).toBe(true);
    expect((await api('GET', '/locations/downtown-office')).json.default_survey_url).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 350));
    const later = await api('GET', '/locations/downtown-office');
    expect(later.status).toBe(200);
    expect(later.json.default_survey_url).toMatch(/^https:\/\//);
    expect(later.json).toMatchObject({ id: created.json.id, slug: 'downtown-office' });
  });

  it('auto-generates and de-duplicates slugs, and enforces the slug charset', async () => {
    const a = await api('POST', '/locations', { name: 'Café Zoë' });
    const b = await api('POST', '/locations', { name: 'Cafe Zoe' });
    const c = await api('POST', '/locations', { name: 'café zoë!' });
    expect([a.json.slug, b.json.slug, c.json.slug]).toEqual(['cafe-zoe', 'cafe-zoe-2', 'cafe-zoe-3']);
    expect((await api('POST', '/locations', { name: 'Given', slug: 'my-place-1' })).json.slug).toBe(
      'my-place-1',
    );
    for (const slug of ['My-Place', 'my place', 'my_place', 'plâce', '']) {
      const bad = await api('POST', '/locations', { name: 'X', slug });
      expect(bad.status, slug).toBe(422);
      expect(bad.json.error).toEqual(expect.any(String));
    }
    expect((await api('POST', '/locations', { name: 'X', slug: 'my-place-1' })).status).toBe(422);
  });

  it('answers 422 with a message for invalid input', async () => {
    for (const body of [
      {},
      { name: '' },
      { name: 5 },
      { name: 'A', active: 'yes' },
      { name: 'A', city: 3 },
    ]) {
      const answer = await api('POST', '/locations', body);
      expect(answer.status, JSON.stringify(body)).toBe(422);
      expect(answer.json.error).toEqual(expect.any(String));
    }
    expect((await api('POST', '/locations', undefined, { rawBody: '[1,2]' })).status).toBe(422);
    expect((await api('POST', '/locations', undefined, { rawBody: '"name"' })).status).toBe(422);
    const broken = await api('POST', '/locations', undefined, { rawBody: '{"name":' });
    expect(broken.status).toBe(400);
    expect(broken.json.error).toEqual(expect.any(String));
  });

  it('lists active by default, inactive with active=false, with cursor pagination', async () => {
    const { api_key } = await control.createCompany();
    const call = partner(sandbox, api_key);
    for (let i = 0; i < 7; i++) await call('POST', '/locations', { name: `Active ${i}` });
    for (let i = 0; i < 3; i++) await call('POST', '/locations', { name: `Closed ${i}`, active: false });

    const names: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await call('GET', `/locations?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.json.pagination.count).toBe(page.json.locations.length);
      names.push(...page.json.locations.map((l: { name: string }) => l.name));
      cursor = page.json.pagination.next_cursor;
    } while (cursor);
    expect(names).toEqual([0, 1, 2, 3, 4, 5, 6].map((i) => `Active ${i}`));

    const inactive = await call('GET', '/locations?active=false');
    expect(inactive.json.locations.map((l: { name: string }) => l.name)).toEqual([
      'Closed 0',
      'Closed 1',
      'Closed 2',
    ]);
    expect(inactive.json.pagination).toEqual({ count: 3, has_more: false, next_cursor: null });
    expect((await call('GET', '/locations?active=true')).json.locations).toHaveLength(7);

    const first = await call('GET', '/locations?limit=2');
    const next = first.json.pagination.next_cursor;
    expect((await call('GET', `/locations?active=false&cursor=${next}`)).status).toBe(422);
    for (const query of ['limit=0', 'limit=101', 'limit=x', 'active=maybe', 'cursor=junk']) {
      expect((await call('GET', `/locations?${query}`)).status, query).toBe(422);
    }
    const professionalsCursor = (await call('GET', '/professionals')).json.pagination.next_cursor;
    expect(professionalsCursor).toBeNull();
  });

  it('answers 404 for an unknown slug or another company’s slug', async () => {
    await api('POST', '/locations', { name: 'Mine Only' });
    expect((await api('GET', '/locations/mine-only')).status).toBe(200);
    const { api_key } = await control.createCompany();
    const stranger = await partner(sandbox, api_key)('GET', '/locations/mine-only');
    expect(stranger.status).toBe(404);
    expect(stranger.json.error).toEqual(expect.any(String));
    expect((await api('GET', '/locations/nowhere')).status).toBe(404);
  });
});

describe('activating and deactivating through the control API', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  let api: Call;

  beforeAll(async () => {
    sandbox = await testSandbox({});
    ({ control } = sandbox);
    api = partner(sandbox, sandbox.apiKey);
  });
  afterAll(() => sandbox.close());

  const listedSlugs = async (kind: string, active: boolean) =>
    ((await api('GET', `/${kind}?active=${active}`)).json[kind] as Array<{ slug: string }>).map(
      (r) => r.slug,
    );

  it('moves a location or professional between the two listings, and 404s an unknown slug', async () => {
    await api('POST', '/locations', { name: 'Riverside' });
    await api('POST', '/professionals', { first_name: 'Ida', last_name: 'Wells', email: 'ida@example.com' });
    for (const [kind, slug] of [
      ['locations', 'riverside'],
      ['professionals', 'ida-wells'],
    ] as const) {
      await control.setDirectoryActive(sandbox.companyId, kind, slug, false);
      expect(await listedSlugs(kind, true)).not.toContain(slug);
      expect(await listedSlugs(kind, false)).toContain(slug);
      expect((await api('GET', `/${kind}/${slug}`)).json.active).toBe(false);
      await control.setDirectoryActive(sandbox.companyId, kind, slug, true);
      expect(await listedSlugs(kind, true)).toContain(slug);
      expect(await listedSlugs(kind, false)).not.toContain(slug);
    }
    await expect(
      control.setDirectoryActive(sandbox.companyId, 'locations', 'nowhere', true),
    ).rejects.toMatchObject({
      status: 404,
    });
  });
});
