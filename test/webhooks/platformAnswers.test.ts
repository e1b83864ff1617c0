import { describe, expect, it } from 'vitest';
import { SecretScrubber } from '../../src/log.js';
import { ensureRegistration } from '../../src/webhooks/ensure.js';
import { SigningSecrets } from '../../src/webhooks/secrets.js';
import { quietLog } from '../helpers/log.js';
import { fakePlatformFixture } from '../pull/helpers.js';

const URL = 'https://mirror.example.com/webhooks/review-created';
const SECRET = 'whsec_platform_answers_test_1';

/**
 * Spec 4.6 types none of a webhook's informational fields and shows no list shape: answers the
 * sandbox never gives, over real HTTP, must still leave the registration and its secret stored.
 */
describe('webhook answers of other shapes', () => {
  let listed: Array<Record<string, unknown>> = [];
  const secrets = new SigningSecrets([], new SecretScrubber());

  const fx = fakePlatformFixture(({ method, path }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') return { status: 200, body: listed };
    const webhook = {
      id: 'wh_1',
      url: URL,
      events: ['review.created'],
      // Unix seconds, a string flag and a number where text was expected.
      created_at: 1_764_000_000,
      is_active: 'true',
      description: 42,
      signing_secret: SECRET,
    };
    listed = [{ ...webhook, signing_secret: undefined }];
    return { status: 201, body: { webhook } };
  });

  const stored = () => fx.db.knex(fx.db.table('webhooks')).where({ id: 'wh_1' }).first();
  const ensure = () =>
    ensureRegistration({ api: fx.api, db: fx.db, secrets, log: quietLog, haveConfiguredSecrets: false }, URL);

  it('stores the secret of a registration whose answer types its fields otherwise', async () => {
    expect(await ensure()).toMatchObject({ register: true });
    expect(await stored()).toMatchObject({
      signing_secret: SECRET,
      is_active: true,
      description: null,
      created_at: null,
    });
    expect(secrets.current()).toEqual([SECRET]);
  });

  it('records a list whose created_at is no ISO 8601 and whose last_error holds U+0000', async () => {
    listed = [
      { id: 'wh_1', url: URL, created_at: 'yesterday', last_error: 'HTTP 500: \u0000', is_active: 'false' },
      { id: 'wh_2', url: 'https://other.example.com/x', created_at: 'Tue, 24 Nov 2026 10:00:00 GMT' },
    ];
    expect(await ensure()).toEqual({ keep: 'wh_1', register: false, remove: [] });
    expect(await stored()).toMatchObject({
      signing_secret: SECRET,
      is_active: false,
      last_error: 'HTTP 500: \uFFFD',
    });
    const other = await fx.db.knex(fx.db.table('webhooks')).where({ id: 'wh_2' }).first();
    expect(other.created_at).toEqual(new Date('2026-11-24T10:00:00Z'));
  });
});
