import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { runJob } from '../../src/jobs/runner.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { pullJobs } from '../../src/pull/jobs.js';
import { formatStatus, readStatus } from '../../src/status/report.js';
import { freshDb } from '../helpers/db.js';
import {
  type FakeAnswer,
  type FakePlatform,
  type FakeRequest,
  startFakePlatform,
} from '../helpers/fakePlatform.js';
import { quietLog } from '../helpers/log.js';
import { feedReview, pullContext, testApi } from '../pull/helpers.js';

const KEY = 'rm_test_key_123456';
const reviews = Array.from({ length: 5 }, (_, i) => feedReview(i, Date.now() - (i + 1) * 60_000));

/**
 * What `status` says of the API key after a run of the reviews job failed, on real runs recorded
 * in `sync_runs` against a platform over real HTTP: the platform answers every request with
 * `answer`.
 */
describe('status: the API key at the last attempt', () => {
  let platform: FakePlatform;
  let db: Db;
  let api: PartnerApi;
  let answer: (req: FakeRequest) => FakeAnswer;

  beforeAll(async () => {
    platform = await startFakePlatform((req) => answer(req));
    db = await freshDb();
    api = testApi(
      { url: platform.url, apiKey: KEY },
      { retry: { maxRetries: 0, budgetMs: 1_000, baseDelayMs: 5, maxDelayMs: 5 } },
    );
  });
  afterAll(async () => {
    await api?.close();
    await platform?.close();
    await db?.close();
  });

  const syncReviews = async () => {
    const [job] = pullJobs(pullContext(db, api), 'reviews', false);
    return runJob({ db, log: quietLog }, job!, { wait: true }).then(
      () => undefined,
      (e: unknown) => e,
    );
  };
  const platformState = async () => {
    const report = await readStatus(db);
    return { json: report.platform, text: formatStatus(report) };
  };

  it('accepted when the run failed on a page the platform served (more pages claimed, no cursor)', async () => {
    answer = () => ({
      status: 200,
      body: { reviews, pagination: { count: reviews.length, has_more: true, next_cursor: null } },
    });
    expect(String(await syncReviews())).toContain('broke the pagination protocol');
    const state = await platformState();
    expect(state.json).toMatchObject({ api_key_accepted: true });
    expect(state.text).toContain('platform: API key accepted at the last attempt');
  });

  it('accepted when the run failed on a page the platform served in another shape', async () => {
    answer = () => ({ status: 200, body: { reviews, pagination: { count: reviews.length } } });
    expect(String(await syncReviews())).toContain('returned an invalid body');
    expect((await platformState()).json).toMatchObject({ api_key_accepted: true });
  });

  it('accepted when the run read pages before the platform failed', async () => {
    answer = ({ query }) =>
      query.get('cursor') === null
        ? {
            status: 200,
            body: { reviews, pagination: { count: reviews.length, has_more: true, next_cursor: 'p2' } },
          }
        : { status: 503, body: { error: 'maintenance' } };
    expect(String(await syncReviews())).toContain('answered 503');
    const [run] = await db.knex(db.table('sync_runs')).orderBy('id', 'desc').limit(1);
    expect(run.counts).toMatchObject({ pages: 1 });
    expect((await platformState()).json).toMatchObject({ api_key_accepted: true });
  });

  it('refused on a 401, and unknown, not "not reached", when the platform answered 503', async () => {
    answer = () => ({ status: 401, body: { error: 'invalid key' } });
    await syncReviews();
    expect((await platformState()).json).toMatchObject({ api_key_accepted: false });

    answer = () => ({ status: 503, body: { error: 'maintenance' } });
    expect(String(await syncReviews())).toContain('answered 503');
    const state = await platformState();
    expect(state.json).toMatchObject({ api_key_accepted: null });
    expect(state.text).toContain('platform: API key unknown at the last attempt');
    expect(state.text).not.toContain('not reached');
  });
});
