import { describe, expect, it } from 'vitest';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { ApiSchemaError } from '../../src/partner-api/errors.js';
import { ensureRegistration } from '../../src/webhooks/ensure.js';
import { checkWebhookHealth } from '../../src/webhooks/health.js';
import { SigningSecrets } from '../../src/webhooks/secrets.js';
import { recordListedWebhooks, saveRegistration } from '../../src/webhooks/webhooksSql.js';
import type { FakeAnswer } from '../helpers/fakePlatform.js';
import { quietLog } from '../helpers/log.js';
import { fakePlatformFixture } from '../pull/helpers.js';
import { notDeletedLog } from './helpers.js';

const URL = 'https://mirror.example.com/webhooks/review-created';
const OTHER_URL = 'https://other.example.com/hook';
const SECRET = 'whsec_unsafe_id_ours_1';
const NEW_SECRET = 'whsec_unsafe_id_registered_1';
const UNSAFE = '9007199254740993';
/** What JSON.parse makes of UNSAFE: the id of another webhook, or of none. */
const ALTERED = '9007199254740992';

const failure = (run: Promise<unknown>) =>
  run.then(
    () => undefined,
    (e: unknown) => e,
  );

const hookText = (id: string, createdAt: string) =>
  `{"id":${id},"url":${JSON.stringify(URL)},"events":["review.created"],"created_at":"${createdAt}"}`;

/** A logger at debug whose lines the test reads (its scrubber knows no secret). */
function readLog() {
  const lines: Array<Record<string, unknown> & { level: string; msg: string }> = [];
  const destination = { write: (line: string) => lines.push(JSON.parse(line)) };
  const log = makeLogger({
    level: 'debug',
    scrubber: new SecretScrubber(),
    destination: destination as unknown as NodeJS.WritableStream,
  });
  return { log, lines };
}

/**
 * The platform answers, over HTTP, with a webhook id past 2^53 written as a JSON number: the
 * client's JSON.parse alters it, so the daemon must neither delete nor keep a webhook by it. That
 * is the entry's problem alone: the list's other webhooks are handled as usual.
 */
describe('ensure and the health poll with a numeric webhook id past 2^53', () => {
  let listText = '';
  let registerText = '';
  const requests: string[] = [];
  const fx = fakePlatformFixture(({ method, path, query }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    requests.push(method === 'DELETE' ? `DELETE ${query.get('id')}` : method);
    if (method === 'GET') return { status: 200, body: listText };
    if (method === 'POST') return { status: 201, body: registerText };
    return { status: 204, body: '' };
  });
  const stored = () => fx.db.knex(fx.db.table('webhooks')).orderBy('id').select('id', 'deleted_at');
  const deps = (secrets: SigningSecrets, log = quietLog, warnedInexact?: Set<string>) => ({
    api: fx.api,
    db: fx.db,
    secrets,
    log,
    haveConfiguredSecrets: false,
    warnedInexact,
  });

  it('keeps ours and handles the other webhooks as usual, never naming that one; warns of it once', async () => {
    await saveRegistration(fx.db.knex, fx.db, {
      id: 'wh_ours',
      url: URL,
      created_at: '2026-01-02T00:00:00Z',
      signing_secret: SECRET,
    });
    // Another webhook whose id is what JSON.parse makes of UNSAFE: its row must stay as it is.
    await recordListedWebhooks(fx.db.knex, fx.db, [{ id: ALTERED, url: OTHER_URL, is_active: true }]);
    const leaked = 'whsec_listed_by_mistake_1';
    // A duplicate of our URL, inactive and failing, shown with a secret it should not show:
    // ensure would delete it, by the id as read.
    const unsafeEntry = `{"id":${UNSAFE},"url":${JSON.stringify(URL)},"events":["review.created"],"created_at":"2026-01-01T00:00:00Z","is_active":false,"last_error":"HTTP 500","signing_secret":"${leaked}"}`;
    listText = `{"webhooks":[${unsafeEntry},${hookText('"wh_ours"', '2026-01-02T00:00:00Z')},${hookText('"wh_dup"', '2026-01-03T00:00:00Z')}]}`;
    requests.length = 0;
    const secrets = new SigningSecrets([], new SecretScrubber());
    const { log, lines } = readLog();
    const warned = new Set<string>();
    expect(await ensureRegistration(deps(secrets, log, warned), URL)).toEqual({
      keep: 'wh_ours',
      register: false,
      remove: ['wh_dup'],
      undeleted: [],
    });
    expect(requests).toEqual(['GET', 'DELETE wh_dup']);

    const health = await checkWebhookHealth({ api: fx.api, db: fx.db, secrets, log, warnedInexact: warned });
    expect(health.listed.map((w) => w.id)).toEqual([undefined, 'wh_ours', 'wh_dup']);
    expect(health.states).toEqual({ active: 2, inactive: 1, failing: 0 });
    expect(requests).toEqual(['GET', 'DELETE wh_dup', 'GET']);
    expect(await stored()).toEqual([
      { id: ALTERED, deleted_at: null },
      { id: 'wh_dup', deleted_at: expect.any(Date) },
      { id: 'wh_ours', deleted_at: null },
    ]);
    const altered = await fx.db.knex(fx.db.table('webhooks')).where({ id: ALTERED }).first();
    expect(altered).toMatchObject({ url: OTHER_URL, is_active: true, last_error: null });
    expect(await secrets.refresh(fx.db)).toEqual([SECRET]);

    // Warned of by ensure, then at debug by the health poll: by its place in the list and its URL.
    const about = lines.filter((l) => l.listPosition !== undefined);
    expect(about.map((l) => l.level)).toEqual(['warn', 'debug']);
    expect(about[0]).toMatchObject({
      listPosition: 0,
      url: URL,
      idProblem: `is a number past 2^53 (read as ${ALTERED}), which JSON cannot carry exactly`,
      msg: expect.stringMatching(
        /^listed webhook whose id cannot be named exactly: never matched, recorded or deleted/,
      ),
    });
    expect(JSON.stringify(lines)).not.toContain(leaked);
    expect(JSON.stringify(lines)).not.toContain(UNSAFE);
  });

  it('still takes a list with a numeric id JSON reads exactly', async () => {
    listText = `[${hookText('9007199254740991', '2026-01-01T00:00:00Z')},${hookText('"wh_ours"', '2026-01-02T00:00:00Z')}]`;
    requests.length = 0;
    const secrets = new SigningSecrets([], new SecretScrubber());
    expect(await ensureRegistration(deps(secrets), URL)).toEqual({
      keep: 'wh_ours',
      register: false,
      remove: ['9007199254740991'],
      undeleted: [],
    });
    expect(requests).toEqual(['GET', 'DELETE 9007199254740991']);
  });

  it('holds back registering our URL while such a webhook has it, and registers once it is gone', async () => {
    await fx.db.knex(fx.db.table('webhooks')).delete();
    registerText = `{"webhook":{"id":"wh_new","url":${JSON.stringify(URL)},"signing_secret":"${NEW_SECRET}"}}`;
    // Perhaps one we registered, whose answer had such an id: another would be as unusable.
    listText = `[${hookText(UNSAFE, '2026-01-01T00:00:00Z')}]`;
    requests.length = 0;
    const secrets = new SigningSecrets([], new SecretScrubber());
    const { log, lines } = readLog();
    const warned = new Set<string>();
    const held = { keep: undefined, register: false, remove: [], undeleted: [] };
    expect(await ensureRegistration(deps(secrets, log, warned), URL)).toEqual(held);
    expect(await ensureRegistration(deps(secrets, log, warned), URL)).toEqual(held);
    expect(requests).toEqual(['GET', 'GET']);
    const notRegistered = lines.filter((l) => l.msg.startsWith('WEBHOOK_PUBLIC_URL not registered'));
    expect(notRegistered.map((l) => l.level)).toEqual(['warn', 'debug']);

    // At another URL it holds nothing back.
    listText = `[${hookText(UNSAFE, '2026-01-01T00:00:00Z').replace(URL, OTHER_URL)}]`;
    requests.length = 0;
    expect(await ensureRegistration(deps(secrets), URL)).toMatchObject({ register: true, remove: [] });
    expect(requests).toEqual(['GET', 'POST']);
    expect(await secrets.refresh(fx.db)).toEqual([NEW_SECRET]);
  });

  it('refuses a registration answered with such an id: nothing stored or deleted, no secret in the error', async () => {
    await fx.db.knex(fx.db.table('webhooks')).delete();
    listText = '[]';
    registerText = `{"webhook":{"id":${UNSAFE},"url":${JSON.stringify(URL)},"signing_secret":"${NEW_SECRET}","description":"made with ${NEW_SECRET}"}}`;
    requests.length = 0;
    const secrets = new SigningSecrets([], new SecretScrubber());
    const error = await failure(ensureRegistration(deps(secrets), URL));
    expect(error).toBeInstanceOf(ApiSchemaError);
    expect((error as ApiSchemaError).field).toBe('webhook.id');
    expect((error as Error).message).toContain('delete it by hand');
    expect((error as Error).message).not.toContain(NEW_SECRET);
    expect(JSON.stringify((error as Error).cause)).not.toContain(NEW_SECRET);
    expect(requests).toEqual(['GET', 'POST']);
    expect(await stored()).toEqual([]);
    expect(await secrets.refresh(fx.db)).toEqual([]);
  });
});

/**
 * Which undeletable duplicates were warned of belongs to the caller that ensures again and again
 * (a receiver's health job), not to the process: another receiver warns of its own.
 */
describe('the warning for a duplicate the platform will not delete', () => {
  let deleteAnswer: FakeAnswer = { status: 403, body: { error: 'locked' } };
  let listed = ['wh_dup', 'wh_ours'];
  const fx = fakePlatformFixture(({ method, path, query }) => {
    if (path === '/reviews') return { status: 200, body: { reviews: [] } };
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') {
      const hooks = listed.map((id, i) => ({
        id,
        url: URL,
        events: ['review.created'],
        created_at: `2026-01-0${i + 1}T00:00:00Z`,
      }));
      return { status: 200, body: { webhooks: hooks } };
    }
    if (deleteAnswer.status === 204) listed = listed.filter((id) => id !== query.get('id'));
    return deleteAnswer;
  });
  const secrets = new SigningSecrets([], new SecretScrubber());
  const ensure = (warnedUndeletable: Set<string>, log: ReturnType<typeof notDeletedLog>['log']) =>
    ensureRegistration(
      { api: fx.api, db: fx.db, secrets, log, haveConfiguredSecrets: false, warnedUndeletable },
      URL,
    );

  it('is given once per owner, then at debug, and again after the duplicate was deleted', async () => {
    await saveRegistration(fx.db.knex, fx.db, {
      id: 'wh_ours',
      url: URL,
      created_at: '2026-01-02T00:00:00Z',
      signing_secret: SECRET,
    });
    const first = notDeletedLog();
    const second = notDeletedLog();
    const a = new Set<string>();
    const b = new Set<string>();
    await ensure(a, first.log);
    await ensure(a, first.log);
    await ensure(b, second.log);
    expect(first.notDeleted().map((l) => l.level)).toEqual(['warn', 'debug']);
    expect(second.notDeleted().map((l) => l.level)).toEqual(['warn']);

    deleteAnswer = { status: 204, body: '' };
    expect(await ensure(a, first.log)).toMatchObject({ remove: ['wh_dup'], undeleted: [] });
    // The platform shows the same duplicate again (restored on its side), and refuses again.
    listed = ['wh_dup', 'wh_ours'];
    await fx.db.knex(fx.db.table('webhooks')).where({ id: 'wh_dup' }).update({ deleted_at: null });
    deleteAnswer = { status: 403, body: { error: 'locked' } };
    await ensure(a, first.log);
    expect(first.notDeleted().map((l) => l.level)).toEqual(['warn', 'debug', 'warn']);
  });
});

describe('SigningSecrets.scrub', () => {
  it('hides every secret it knows, configured, stored or added to its scrubber', () => {
    const scrubber = new SecretScrubber();
    scrubber.add('rm_api_key_scrub_1');
    const secrets = new SigningSecrets([SECRET], scrubber);
    expect(secrets.scrub(`refused ${SECRET} with rm_api_key_scrub_1`)).toBe(
      'refused [REDACTED] with [REDACTED]',
    );
  });
});
