import { describe, expect, it } from 'vitest';
import { SecretScrubber } from '../../src/log.js';
import { ensureRegistration } from '../../src/webhooks/ensure.js';
import { SigningSecrets } from '../../src/webhooks/secrets.js';
import { quietLog } from '../helpers/log.js';
import { fakePlatformFixture } from '../pull/helpers.js';

const URL = 'https://mirror.example.com/webhooks/review-created';

/**
 * `run` finds its webhook among the platform's list at every start: if it does not recognise the
 * one it registered, it registers another (every review then comes twice) or deletes its own.
 */
describe('ensure recognises the webhook it registered', () => {
  let id = (n: number) => `wh_${n}`;
  const listed: Array<Record<string, unknown>> = [];
  const deleted: string[] = [];
  const fx = fakePlatformFixture(({ method, path, query, body }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') return { status: 200, body: { webhooks: listed } };
    if (method === 'DELETE') {
      deleted.push(query.get('id') ?? '');
      return { status: 204, body: '' };
    }
    // The platform stores the URL normalised (WHATWG): host in lower case, no default port.
    const url = new globalThis.URL((JSON.parse(body) as { url: string }).url).href;
    const webhook = { id: id(listed.length + 1), url, events: ['review.created'] };
    listed.push(webhook);
    return {
      status: 201,
      body: { webhook: { ...webhook, signing_secret: `whsec_ensure_${listed.length}` } },
    };
  });
  const start = (url: string) =>
    ensureRegistration(
      {
        api: fx.api,
        db: fx.db,
        secrets: new SigningSecrets([], new SecretScrubber()),
        log: quietLog,
        haveConfiguredSecrets: false,
      },
      url,
    );

  it('by its URL as the platform normalised it', async () => {
    const configured = 'https://Mirror.Example.com:443/webhooks/review-created';
    expect(await start(configured)).toMatchObject({ register: true });
    for (let restart = 0; restart < 2; restart++) {
      expect(await start(configured)).toEqual({ keep: 'wh_1', register: false, remove: [], undeleted: [] });
    }
    expect(listed).toHaveLength(1);
    expect(deleted).toEqual([]);
  });

  it('by its id holding U+0000, which is stored as U+FFFD', async () => {
    listed.length = 0;
    id = (n) => `wh\u0000${n}`;
    expect(await start(URL)).toMatchObject({ register: true });
    expect(await start(URL)).toEqual({ keep: 'wh\u00001', register: false, remove: [], undeleted: [] });
    expect(listed).toHaveLength(1);
    expect(deleted).toEqual([]);
    const row = await fx.db.knex(fx.db.table('webhooks')).where({ id: 'wh\uFFFD1' }).first();
    expect(row).toMatchObject({ signing_secret: 'whsec_ensure_1', deleted_at: null });
  });

  it('deletes a duplicate whose id holds U+0000 on the platform and here', async () => {
    // A second registration of the URL, by another replica whose answer was lost: not ours.
    listed.push({ id: 'wh\u00002', url: URL, events: ['review.created'] });
    expect(await start(URL)).toEqual({
      keep: 'wh\u00001',
      register: false,
      remove: ['wh\u00002'],
      undeleted: [],
    });
    expect(deleted).toEqual(['wh\u00002']);
    const row = await fx.db.knex(fx.db.table('webhooks')).where({ id: 'wh\uFFFD2' }).first();
    expect(row.deleted_at).not.toBeNull();
  });
});
