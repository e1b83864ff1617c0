import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/schema.js';
import type { RunCounts } from '../../src/jobs/runCounts.js';
import { SecretScrubber } from '../../src/log.js';
import { makeMetrics } from '../../src/metrics.js';
import { ensureRegistration } from '../../src/webhooks/ensure.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../src/webhooks/receiver.js';
import { SigningSecrets } from '../../src/webhooks/secrets.js';
import { saveRegistration } from '../../src/webhooks/webhooksSql.js';
import type { FakeAnswer } from '../helpers/fakePlatform.js';
import { fakePlatformFixture } from '../pull/helpers.js';
import { notDeletedLog } from './helpers.js';

const URL = 'https://mirror.example.com/webhooks/review-created';
const SECRET = 'whsec_undeletable_kept_1';
const DUP_SECRET = 'whsec_undeletable_duplicate_1';

type Hook = { id: string; url: string; events: string[]; created_at: string; last_error?: string };
const hook = (id: string, created_at: string): Hook => ({
  id,
  url: URL,
  events: ['review.created'],
  created_at,
});

/**
 * The platform lists two webhooks for WEBHOOK_PUBLIC_URL and refuses, lastingly, to delete the
 * duplicate. The health job of `run` must still record the kept webhook's state at every run,
 * and try the delete again, warning once.
 */
describe('the health job with a duplicate the platform will not delete', () => {
  let listed: Hook[] = [];
  let deleteAnswer: FakeAnswer = { status: 204, body: '' };
  const deleted: string[] = [];
  let lists = 0;
  const fx = fakePlatformFixture(({ method, path, query }) => {
    // The key check after a 403 (http.ts): the key is fine, the delete alone is refused.
    if (path === '/reviews') return { status: 200, body: { reviews: [] } };
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') {
      lists++;
      return { status: 200, body: { webhooks: listed } };
    }
    if (method === 'DELETE') {
      const id = query.get('id') ?? '';
      deleted.push(id);
      if (deleteAnswer.status === 204) listed = listed.filter((w) => w.id !== id);
      return deleteAnswer;
    }
    return { status: 422, body: { error: 'not expected' } };
  });
  const { log, notDeleted } = notDeletedLog();
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    const config = parseConfig({
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      WEBHOOK_PUBLIC_URL: URL,
      WEBHOOK_HEALTH_CRON: 'off',
    });
    // Both ours, wh_ours the newer: it is kept, wh_dup is the duplicate.
    await saveRegistration(fx.db.knex, fx.db, {
      ...hook('wh_dup', '2026-01-01T00:00:00Z'),
      signing_secret: DUP_SECRET,
    });
    await saveRegistration(fx.db.knex, fx.db, {
      ...hook('wh_ours', '2026-01-02T00:00:00Z'),
      signing_secret: SECRET,
    });
    listed = [hook('wh_dup', '2026-01-01T00:00:00Z'), hook('wh_ours', '2026-01-02T00:00:00Z')];
    const scrubber = new SecretScrubber();
    receiver = await startWebhookReceiver({
      config,
      log,
      scrubber,
      db: fx.db,
      metrics: makeMetrics(),
      api: fx.api,
    });
  });
  afterAll(async () => {
    await receiver?.close();
  });

  const healthRun = async () => {
    const counts: RunCounts = {};
    await receiver.jobs[0]!.run(counts);
    return counts;
  };
  const stored = (id: string) => fx.db.knex(fx.db.table('webhooks')).where({ id }).first();

  it('records the kept webhook at every run, tries the delete again, and warns once', async () => {
    expect(receiver.jobs).toHaveLength(1);
    // The refusal echoes the duplicate's secret: it must not reach the log.
    deleteAnswer = {
      status: 403,
      body: { error: `webhook is locked by an integration (secret ${DUP_SECRET})` },
    };
    expect(await healthRun()).toMatchObject({ removed: 0, not_removed: 1, listed: 2, active: 2, failing: 0 });

    listed = listed.map((w) => (w.id === 'wh_ours' ? { ...w, last_error: 'HTTP 502 at 10:00' } : w));
    expect(await healthRun()).toMatchObject({ removed: 0, not_removed: 1, listed: 2, failing: 1 });
    expect((await stored('wh_ours')).last_error).toBe('HTTP 502 at 10:00');
    expect(deleted).toEqual(['wh_dup', 'wh_dup']);
    expect((await stored('wh_dup')).deleted_at).toBeNull();
    expect(receiver.secrets.current().toSorted()).toEqual([SECRET, DUP_SECRET].toSorted());

    const lines = notDeleted();
    expect(lines.map((l) => [l.level, l.webhookId])).toEqual([
      ['warn', 'wh_dup'],
      ['debug', 'wh_dup'],
    ]);
    expect(lines[0]!.err).toBe(
      'DELETE /webhook?id=:id answered 403: webhook is locked by an integration (secret [REDACTED])',
    );
  });

  it('deletes it once the platform allows, and then only checks health', async () => {
    deleteAnswer = { status: 204, body: '' };
    const counts = await healthRun();
    expect(counts).toMatchObject({ removed: 1, listed: 1 });
    expect(counts).not.toHaveProperty('not_removed');
    expect((await stored('wh_dup')).deleted_at).not.toBeNull();
    expect(receiver.secrets.current()).toEqual([SECRET]);

    const listsBefore = lists;
    await healthRun();
    // Registration ensured: the health check's list alone, no delete.
    expect(lists - listsBefore).toBe(1);
    expect(deleted).toEqual(['wh_dup', 'wh_dup', 'wh_dup']);
  });
});

/** `ensureRegistration` with each way a delete can fail for good: the kept webhook stays usable. */
describe('ensure with a duplicate whose delete fails', () => {
  let listed: Hook[] = [];
  // Sent as it is: a list the fake's own JSON.stringify could not write.
  let deleteAnswer: FakeAnswer = { status: 204, body: '' };
  const deleted: string[] = [];
  let registered = 0;
  const fx = fakePlatformFixture(({ method, path, query }) => {
    if (path === '/reviews') return { status: 200, body: { reviews: [] } };
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'GET') return { status: 200, body: { webhooks: listed } };
    if (method === 'DELETE') {
      deleted.push(query.get('id') ?? '');
      return deleteAnswer;
    }
    registered++;
    const webhook = hook(`wh_new_${registered}`, '2026-02-01T00:00:00Z');
    listed.push(webhook);
    return { status: 201, body: { webhook: { ...webhook, signing_secret: `${SECRET}_new_${registered}` } } };
  });
  const ensure = (log: ReturnType<typeof notDeletedLog>['log'], secrets: SigningSecrets) =>
    ensureRegistration({ api: fx.api, db: fx.db, secrets, log, haveConfiguredSecrets: false }, URL);
  const fresh = async () => {
    await fx.db.knex(fx.db.table('webhooks')).delete();
    deleted.length = 0;
  };
  const deletedAt = async (id: string) =>
    (await fx.db.knex(fx.db.table('webhooks')).where({ id }).first())?.deleted_at;

  const refusals: Array<[string, FakeAnswer, string]> = [
    [
      '400',
      { status: 400, body: { error: 'webhook is managed by an integration' } },
      'answered 400: webhook is managed by an integration',
    ],
    [
      '403',
      { status: 403, body: { error: 'forbidden for this webhook' } },
      'answered 403: forbidden for this webhook',
    ],
    ['200 {"success":false}', { status: 200, body: { success: false } }, 'answered 200: {"success":false}'],
  ];
  for (const [name, answer, reason] of refusals) {
    it(`keeps our webhook and its secret when the delete is answered ${name}`, async () => {
      await fresh();
      const dup = `wh_dup_${name.slice(0, 3)}`;
      listed = [hook(dup, '2026-01-01T00:00:00Z'), hook('wh_ours', '2026-01-02T00:00:00Z')];
      await saveRegistration(fx.db.knex, fx.db, {
        ...hook('wh_ours', '2026-01-02T00:00:00Z'),
        signing_secret: SECRET,
      });
      deleteAnswer = answer;
      const { log, notDeleted } = notDeletedLog();
      const secrets = new SigningSecrets([], new SecretScrubber());
      expect(await ensure(log, secrets)).toEqual({
        keep: 'wh_ours',
        register: false,
        remove: [dup],
        undeleted: [dup],
      });
      expect(deleted).toEqual([dup]);
      expect(await deletedAt(dup)).toBeNull();
      expect(secrets.current()).toEqual([SECRET]);
      expect(notDeleted()).toMatchObject([
        { level: 'warn', webhookId: dup, err: `DELETE /webhook?id=:id ${reason}` },
      ]);
    });
  }

  it('stores the secret of the webhook it registered when the old ones cannot be deleted', async () => {
    await fresh();
    // Neither is ours, and no secret is configured: a new one is registered, both are duplicates.
    listed = [hook('wh_old_1', '2026-01-01T00:00:00Z'), hook('wh_old_2', '2026-01-02T00:00:00Z')];
    deleteAnswer = { status: 400, body: { error: 'cannot delete' } };
    const { log, notDeleted } = notDeletedLog();
    const secrets = new SigningSecrets([], new SecretScrubber());
    expect(await ensure(log, secrets)).toEqual({
      keep: undefined,
      register: true,
      remove: ['wh_old_1', 'wh_old_2'],
      undeleted: ['wh_old_1', 'wh_old_2'],
    });
    expect(secrets.current()).toEqual([`${SECRET}_new_1`]);
    expect(notDeleted().map((l) => l.webhookId)).toEqual(['wh_old_1', 'wh_old_2']);
    // The next ensure keeps the new one and tries the old ones again, without registering.
    expect(await ensure(log, secrets)).toMatchObject({
      keep: 'wh_new_1',
      register: false,
      undeleted: ['wh_old_1', 'wh_old_2'],
    });
    expect(registered).toBe(1);
  });
});
