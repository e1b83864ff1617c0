import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEEPER_NOT_KEPT } from '../../src/db/storableText.js';
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
  // Sent as it is: an answer the fake's own JSON.stringify could not write.
  let listedText: string | undefined;
  const secrets = new SigningSecrets([], new SecretScrubber());

  const fx = fakePlatformFixture(({ method, path }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') return { status: 200, body: listedText ?? listed };
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
    expect(await ensure()).toEqual({ keep: 'wh_1', register: false, remove: [], undeleted: [] });
    expect(await stored()).toMatchObject({
      signing_secret: SECRET,
      is_active: false,
      last_error: 'HTTP 500: \uFFFD',
    });
    const other = await fx.db.knex(fx.db.table('webhooks')).where({ id: 'wh_2' }).first();
    expect(other.created_at).toEqual(new Date('2026-11-24T10:00:00Z'));
  });

  it('records a list whose last_error is nested thousands deep, kept down to a bounded depth', async () => {
    const deep = `${'['.repeat(6_000)}${']'.repeat(6_000)}`;
    listedText = `[{"id":"wh_1","url":${JSON.stringify(URL)},"last_error":{"detail":${deep}}}]`;
    try {
      expect(await ensure()).toEqual({ keep: 'wh_1', register: false, remove: [], undeleted: [] });
      expect((await stored()).last_error).toContain(DEEPER_NOT_KEPT);
    } finally {
      listedText = undefined;
    }
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

/**
 * Only the id and the secret of a registration's answer matter: informational fields of another
 * shape must not lose the secret, or `run` registers another webhook at every health tick.
 */
describe('a registration answer whose events or url are of another shape', () => {
  const shapes: Array<[string, (id: string) => Record<string, unknown>]> = [
    ['events as a string', (id) => ({ id, url: URL, events: 'review.created' })],
    ['events null', (id) => ({ id, url: URL, events: null })],
    ['no url', (id) => ({ id, events: ['review.created'] })],
    ['url a number', (id) => ({ id, url: 42, events: [1] })],
  ];
  let shape = shapes[0]![1];
  let listed: Array<Record<string, unknown>> = [];
  const deleted: string[] = [];
  const fx = fakePlatformFixture(({ method, path, query }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') return { status: 200, body: { webhooks: listed } };
    if (method === 'DELETE') {
      deleted.push(query.get('id') ?? '');
      return { status: 204, body: '' };
    }
    const answer = shape(`wh_${listed.length + 1}`);
    // The list shows the registration as its answer did, the URL as registered.
    listed.push({ ...answer, url: 'url' in answer ? answer.url : undefined });
    return { status: 201, body: { webhook: { ...answer, signing_secret: `${SECRET}_${listed.length}` } } };
  });
  const ensure = (haveConfiguredSecrets = false) =>
    ensureRegistration(
      {
        api: fx.api,
        db: fx.db,
        secrets: new SigningSecrets([], new SecretScrubber()),
        log: quietLog,
        haveConfiguredSecrets,
      },
      URL,
    );
  const stored = (id: string) => fx.db.knex(fx.db.table('webhooks')).where({ id }).first();

  it('stores the secret and the URL asked for, and keeps that webhook at the next ticks', async () => {
    for (const [name, answerOf] of shapes) {
      listed = [];
      shape = answerOf;
      await fx.db.knex(fx.db.table('webhooks')).delete();
      for (let tick = 0; tick < 3; tick++) await ensure();
      expect(listed, name).toHaveLength(1);
      expect(deleted, name).toEqual([]);
      expect(await stored('wh_1'), name).toMatchObject({ url: URL, signing_secret: `${SECRET}_1` });
    }
  });

  it('neither keeps nor deletes a webhook of the URL whose events it cannot read and that is not ours', async () => {
    await fx.db.knex(fx.db.table('webhooks')).delete();
    shape = (id) => ({ id, url: URL, events: ['review.created'] });
    listed = [{ id: 'wh_other', url: URL, events: 'review.updated' }];
    // Configured secrets would otherwise keep it as ours, none configured would delete it.
    expect(await ensure(true)).toEqual({ keep: undefined, register: true, remove: [], undeleted: [] });
    expect(await ensure(false)).toEqual({ keep: 'wh_2', register: false, remove: [], undeleted: [] });
    expect(deleted).toEqual([]);
    expect(listed.map((w) => w.id)).toEqual(['wh_other', 'wh_2']);
  });
});

/**
 * A webhook id is the table's primary key: one longer than a B-tree entry holds cannot be stored,
 * and its secret with it. Such a registration must not stay behind on the platform unverifiable.
 */
describe('a registration whose id cannot be indexed', () => {
  // Incompressible: PostgreSQL compresses an index entry before it measures it.
  const LONG_ID = randomBytes(6000).toString('base64');
  const deleted: string[] = [];
  const fx = fakePlatformFixture(({ method, path, query }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') return { status: 200, body: { webhooks: [] } };
    if (method === 'DELETE') {
      deleted.push(query.get('id') ?? '');
      return { status: 204, body: '' };
    }
    return { status: 201, body: { webhook: { id: LONG_ID, url: URL, signing_secret: SECRET } } };
  });

  it('deletes the webhook again and says why', async () => {
    const scrubber = new SecretScrubber();
    const secrets = new SigningSecrets([], scrubber);
    await expect(
      ensureRegistration(
        { api: fx.api, db: fx.db, secrets, log: quietLog, haveConfiguredSecrets: false },
        URL,
      ),
    ).rejects.toThrow(
      'the platform registered a webhook with an id of 8000 characters (must be at most 500 characters), which the database cannot store; it was deleted again',
    );
    expect(deleted).toEqual([LONG_ID]);
    expect(Number((await fx.db.knex(fx.db.table('webhooks')).count({ n: '*' }))[0]?.n)).toBe(0);
  });
});
