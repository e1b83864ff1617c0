import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { partner } from './helpers.js';

const ROUTES: Array<[string, string, unknown?]> = [
  ['GET', '/reviews'],
  ['GET', '/locations'],
  ['GET', '/locations/x'],
  ['POST', '/locations', { name: 'X' }],
  ['GET', '/professionals'],
  ['GET', '/professionals/x'],
  ['POST', '/professionals', { first_name: 'a', last_name: 'b', email: 'a@b.co' }],
  ['POST', '/contacts', { email: 'a@b.co' }],
  ['POST', '/events', { email: 'a@b.co', event_type: 'x.y' }],
  ['POST', '/webhook', { url: 'https://x.test', events: ['review.created'] }],
  ['GET', '/webhook'],
  ['DELETE', '/webhook?id=x'],
];

describe('authentication', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;

  beforeAll(async () => {
    sandbox = await testSandbox({ apiKey: 'first-key', seedReviews: 5 });
    ({ control } = sandbox);
  });
  afterAll(() => sandbox.close());

  it('answers 401 on every route for a missing or unknown key', async () => {
    for (const key of [undefined, '', 'nope']) {
      const call = partner(sandbox, key);
      for (const [method, path, body] of ROUTES) {
        const answer = await call(method, path, body);
        expect(answer.status, `${method} ${path} key=${key}`).toBe(401);
        expect(answer.json).toEqual({ error: 'Missing or invalid API key' });
      }
    }
    const truth = await control.truth(sandbox.companyId);
    expect(truth.locations).toHaveLength(0);
    expect(truth.contacts).toHaveLength(0);
  });

  it('answers 403 for a deactivated key and serves again once reactivated', async () => {
    const { api_key } = await control.createCompany({ name: 'Gone Co' });
    const call = partner(sandbox, api_key);
    expect((await call('GET', '/reviews')).status).toBe(200);
    await control.deactivateKey(api_key);
    for (const [method, path, body] of ROUTES) {
      const answer = await call(method, path, body);
      expect(answer.status, `${method} ${path}`).toBe(403);
      expect(answer.json.error).toEqual(expect.any(String));
    }
    await control.activateKey(api_key);
    expect((await call('GET', '/reviews')).status).toBe(200);
  });

  it('scopes data to the key’s company', async () => {
    const other = await control.createCompany();
    const call = partner(sandbox, other.api_key);
    expect((await call('GET', '/reviews')).json.reviews).toEqual([]);
    expect((await partner(sandbox, 'first-key')('GET', '/reviews')).json.reviews).toHaveLength(5);
    await control.submitReviews(other.company_id, [{ comment: 'only mine' }]);
    const mine = (await call('GET', '/reviews')).json.reviews;
    expect(mine.map((r: { comment: string }) => r.comment)).toEqual(['only mine']);
    expect((await partner(sandbox, 'first-key')('GET', '/reviews')).json.reviews).toHaveLength(5);
  });
});
