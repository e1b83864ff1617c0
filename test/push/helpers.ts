import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { OutboxSender, type OutboxSenderDeps } from '../../src/push/events/outboxSender.js';
import type { NewEvent } from '../../src/push/events/outboxSql.js';
import type { UnknownOutcomePolicy } from '../../src/push/events/sendPolicy.js';
import { cliEnv } from '../helpers/cli.js';
import { TEST_DATABASE_URL } from '../helpers/db.js';
import { seededDataDir } from '../helpers/embeddedTemplate.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';

/** An event to enqueue, keyed `key`, to `key@example.com`, carrying its key in its metadata. */
export const newEvent = (key: string, over: Partial<NewEvent> = {}): NewEvent => ({
  key,
  email: `${key}@example.com`,
  contactId: null,
  eventType: 'matter.closed',
  professionalId: null,
  metadata: { key },
  source: 'cli',
  ...over,
});

/** What a file of `contacts push` CLI tests runs against: see pushCliSetup. */
export interface PushCli {
  sandbox: TestSandbox;
  /** A temporary directory for the files pushed, and the embedded database's data under `data`. */
  dir: string;
  /** The CLI's environment: the sandbox, the mode's database in `schema`, contacts unthrottled. */
  env: NodeJS.ProcessEnv;
}

/**
 * The sandbox, a directory and the environment for running `contacts push` as an operator does,
 * on the mode's database (seeded from the run's template when embedded). `env` adds or overrides.
 */
export async function pushCliSetup(options: {
  seed: number;
  schema: string;
  env?: Record<string, string>;
}): Promise<PushCli> {
  const sandbox = await testSandbox({ seed: options.seed });
  const dir = await mkdtemp(join(tmpdir(), `rm-${options.schema}-`));
  if (!TEST_DATABASE_URL) await seededDataDir(join(dir, 'data'));
  const env = cliEnv({
    REVIEWS_API_URL: sandbox.url,
    REVIEWS_API_KEY: sandbox.apiKey,
    DATABASE_URL: TEST_DATABASE_URL,
    DB_SCHEMA: options.schema,
    DATA_DIR: join(dir, 'data'),
    CONTACTS_RATE_PER_SECOND: '1000',
    ...options.env,
  });
  return { sandbox, dir, env };
}

/**
 * An outbox sender for tests over the wire: an API client of its own that sends each request once
 * (no client retries, so each attempt is the sender's), every backoff 1 ms, a 30 s lease, a quiet
 * log unless `deps` gives one. `close` the api when done.
 */
export function quickOutboxSender(
  deps: Pick<OutboxSenderDeps, 'db' | 'scrubber'> & Partial<Pick<OutboxSenderDeps, 'log' | 'metrics'>>,
  platform: { url: string; apiKey: string; requestTimeoutMs?: number },
  options: {
    worker: string;
    concurrency: number;
    unknownOutcome?: UnknownOutcomePolicy;
    maxAttempts?: number;
  },
): { sender: OutboxSender; api: PartnerApi } {
  const api = testApi(
    { url: platform.url, apiKey: platform.apiKey },
    {
      ...(platform.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: platform.requestTimeoutMs }),
      retry: { maxRetries: 0, budgetMs: 0, baseDelayMs: 5, maxDelayMs: 50 },
    },
  );
  const sender = new OutboxSender(
    { log: quietLog, ...deps, api },
    {
      worker: options.worker,
      concurrency: options.concurrency,
      ratePerSecond: 100,
      leaseMs: 30_000,
      policy: {
        unknownOutcome: options.unknownOutcome ?? 'retry',
        maxAttempts: options.maxAttempts ?? 10,
        baseDelayMs: 1,
        maxDelayMs: 1,
        notSentMaxDelayMs: 1,
      },
    },
  );
  return { sender, api };
}
