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
      // The platform's number is dropped: the label sent is kept instead.
      description: 'review-mirror',
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

/**
 * A signing secret PostgreSQL cannot store (it holds U+0000) must not leave a webhook behind whose
 * deliveries nobody can verify, nor reach the error's text.
 */
describe('a registration whose signing secret cannot be stored', () => {
  const NUL_SECRET = 'whsec_nul_\u0000_secret_part';
  const deleted: string[] = [];
  let failDelete = false;
  const fx = fakePlatformFixture(({ method, path, query }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') return { status: 200, body: { webhooks: [] } };
    if (method === 'DELETE') {
      deleted.push(query.get('id') ?? '');
      return failDelete ? { status: 500, body: { error: 'down' } } : { status: 204, body: '' };
    }
    return { status: 201, body: { webhook: { id: 'wh_nul', url: URL, signing_secret: NUL_SECRET } } };
  });
  const scrubber = new SecretScrubber();
  const secrets = new SigningSecrets([], scrubber);
  const ensure = () =>
    ensureRegistration({ api: fx.api, db: fx.db, secrets, log: quietLog, haveConfiguredSecrets: false }, URL);

  it('deletes the webhook again and says why, without the secret', async () => {
    const error = await ensure().then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toBe(
      'the platform registered webhook wh_nul with a signing secret that holds a NUL character (U+0000), which the database cannot store; it was deleted again',
    );
    expect(deleted).toEqual(['wh_nul']);
    expect(Number((await fx.db.knex(fx.db.table('webhooks')).count({ n: '*' }))[0]?.n)).toBe(0);
    expect(scrubber.scrub(`echo ${NUL_SECRET}`)).not.toContain('secret_part');
  });

  it('names the command that deletes it when deleting fails', async () => {
    failDelete = true;
    await expect(ensure()).rejects.toThrow(
      /which the database cannot store; deleting it failed too \(.*500.*\): delete it with `review-mirror webhooks delete wh_nul`$/,
    );
  });
});
