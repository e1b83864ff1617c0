import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxControl, SandboxControlError } from '../../src/sandbox/controlClient.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { partner } from './helpers.js';

type Call = ReturnType<typeof partner>;

describe('control API', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  let api: Call;

  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 1000, seed: 9, apiKey: 'KEY' });
    ({ control } = sandbox);
    api = partner(sandbox, sandbox.apiKey);
  });
  afterAll(() => sandbox.close());

  it('starts with a first company holding the seeded reviews under the given key', async () => {
    expect(sandbox.apiKey).toBe('KEY');
    expect(sandbox.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const visible = await control.visibleReviews(sandbox.companyId);
    expect(visible).toHaveLength(1000);
    const first = await api('GET', '/reviews?limit=100');
    expect(first.json.reviews.map((r: { id: string }) => r.id)).toEqual(
      visible.slice(0, 100).map((r) => r.id),
    );
  });

  it('seeds deterministically: the same seed gives the same reviews on another start', async () => {
    const again = await testSandbox({ seedReviews: 1000, seed: 9 });
    try {
      const a = await control.visibleReviews(sandbox.companyId);
      const b = await again.control.visibleReviews(again.companyId);
      expect(b).toEqual(a);
    } finally {
      await again.close();
    }
  });

  it('creates companies with chosen or random keys, refusing a taken key', async () => {
    const chosen = await control.createCompany({ name: 'Acme', api_key: 'acme-key' });
    expect(chosen).toEqual({ company_id: expect.any(String), api_key: 'acme-key' });
    const random = await control.createCompany();
    expect(random.api_key).not.toBe('acme-key');
    await expect(control.createCompany({ api_key: 'acme-key' })).rejects.toMatchObject({ status: 409 });
  });

  it('submits reviews with given or generated fields, in spec 2.1 shape', async () => {
    const { company_id } = await control.createCompany();
    const given = {
      id: '0b0e9d1c-6c7a-4f53-9d2e-3a1f2b4c5d6e',
      created_at: '2020-02-29T12:34:56.789Z',
      rating: 3.5,
      comment: 'ok',
      is_verified: true,
      reviewer_name: 'Zoë',
      reviewer_email: 'zoe@example.com',
      professional_id: '11111111-2222-4333-8444-555555555555',
      professional_name: 'Dr. Who',
    };
    const [explicit, generated] = await control.submitReviews(company_id, [given, {}]);
    expect(explicit).toEqual({
      id: given.id,
      review_number: expect.stringMatching(/^R-[0-9A-F]{8}$/),
      created_at: given.created_at,
      rating: 3.5,
      comment: 'ok',
      is_verified: true,
      reviewer: { name: 'Zoë', email: 'zoe@example.com' },
      professional: { id: given.professional_id, name: 'Dr. Who' },
    });
    expect(generated!.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(Math.abs(Date.parse(generated!.created_at) - Date.now())).toBeLessThan(5000);
    await expect(control.submitReviews(company_id, [{ id: given.id }])).rejects.toMatchObject({
      status: 409,
    });
    await expect(control.submitReviews(company_id, [{ rating: 6 }])).rejects.toBeInstanceOf(
      SandboxControlError,
    );
    await expect(control.submitReviews('co_missing', [{}])).rejects.toMatchObject({ status: 404 });
  });

  it('reads the truth of a company: everything, newest first, with public and suppressed', async () => {
    const { company_id, api_key } = await control.createCompany();
    const call = partner(sandbox, api_key);
    await control.submitReviews(company_id, [
      { created_at: '2024-01-01T00:00:00.000Z' },
      { created_at: '2024-01-03T00:00:00.000Z', public: false },
      { created_at: '2024-01-02T00:00:00.000Z' },
    ]);
    await call('POST', '/locations', { name: 'L' });
    await call('POST', '/professionals', { first_name: 'T', last_name: 'R', email: 'truth@example.com' });
    await call('POST', '/contacts', { email: 'c@example.com' });
    await call('POST', '/events', { email: 'c@example.com', event_type: 'a.b' });
    await call('POST', '/webhook', { url: 'https://t.example.com', events: ['review.created'] });
    const truth = await control.truth(company_id);
    expect(truth.reviews.map((r) => [r.created_at.slice(0, 10), r.public])).toEqual([
      ['2024-01-03', false],
      ['2024-01-02', true],
      ['2024-01-01', true],
    ]);
    expect(truth.locations).toHaveLength(1);
    expect(truth.professionals[0]).toMatchObject({ email: 'truth@example.com', location_id: null });
    expect(truth.contacts).toHaveLength(1);
    expect(truth.events).toHaveLength(1);
    expect(truth.invites).toHaveLength(1);
    expect(truth.webhooks[0]).toMatchObject({ url: 'https://t.example.com', last_error: null });
    expect(await control.visibleReviews(company_id)).toHaveLength(2);
    const all = await fetch(`${sandbox.url}/_sandbox/companies/${company_id}/truth/reviews`);
    expect(((await all.json()) as { reviews: unknown[] }).reviews).toHaveLength(3);
  });

  it('seeds more reviews into any company through the fast path', async () => {
    const { company_id, api_key } = await control.createCompany();
    expect(await control.seed(company_id, 250, 3)).toBe(250);
    expect(await control.seed(company_id, 250, 3)).toBe(250);
    const visible = await control.visibleReviews(company_id);
    expect(new Set(visible.map((r) => r.id)).size).toBe(500);
    const page = await partner(sandbox, api_key)('GET', '/reviews?limit=100');
    expect(page.json.reviews).toHaveLength(100);
  });

  it('counts partner requests per route and status', async () => {
    await control.reset();
    await api('GET', '/reviews');
    await api('GET', '/reviews?limit=0');
    await api('GET', '/locations/missing');
    await partner(sandbox, 'bad')('GET', '/reviews');
    const counts = await control.requests();
    expect(counts).toEqual({
      total: 4,
      by_route: {
        'GET /api/v1/partner/reviews': { 200: 1, 422: 1, 401: 1 },
        'GET /api/v1/partner/locations/:slug': { 404: 1 },
      },
    });
  });

  it('resets to the start-up state with the same key and company', async () => {
    const { api_key } = await control.createCompany();
    await api('POST', '/locations', { name: 'Temp' });
    await control.submitReviews(sandbox.companyId, [{}]);
    await control.setFaults({ partner: { error500: 1 } });
    await control.reset();
    expect((await partner(sandbox, api_key)('GET', '/reviews')).status).toBe(401);
    const truth = await control.truth(sandbox.companyId);
    expect(truth.reviews).toHaveLength(1000);
    expect(truth.locations).toHaveLength(0);
    expect((await api('GET', '/reviews')).status).toBe(200);
    expect((await control.requests()).total).toBe(2);
  });

  it('documents its routes and answers unknown routes with 404 JSON', async () => {
    const index = await fetch(`${sandbox.url}/_sandbox`);
    expect(((await index.json()) as { routes: string[] }).routes.length).toBeGreaterThan(5);
    const missing = await api('GET', '/nothing-here');
    expect(missing.status).toBe(404);
    expect(missing.json).toEqual({ error: expect.any(String) });
  });
});
