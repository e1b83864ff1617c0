import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describeError } from '../../errors.js';
import type { Logger, SecretScrubber } from '../../log.js';

/** The channel `enqueue_event` and enqueueEvents notify on commit. */
const outboxChannel = (schema: string): string => `${schema}_events_outbox`;

const RECONNECT_MAX_MS = 30_000;

/**
 * A session that LISTENs for new outbox rows and calls `wake` on each notification, so a
 * committed event is sent within milliseconds rather than at the next poll. LISTEN needs a session
 * of its own (a transaction pooler cannot hold one: see DATABASE_LISTEN_URL). Losing it loses
 * nothing — the poll still reads the table — so it reconnects with backoff and never throws.
 */
export class OutboxListener {
  #client: pg.Client | undefined;
  #stopped = false;
  readonly #done: Promise<void>;

  constructor(
    private readonly url: string,
    private readonly schema: string,
    private readonly wake: () => void,
    private readonly log: Logger,
    private readonly scrubber: SecretScrubber,
  ) {
    this.#done = this.#run();
  }

  async #run(): Promise<void> {
    for (let failures = 0; !this.#stopped; ) {
      const client = new pg.Client({
        connectionString: this.url,
        application_name: 'review-mirror-listen',
        connectionTimeoutMillis: 10_000,
        keepAlive: true,
      });
      const lost = new Promise<void>((resolve) => {
        client.on('error', (error) => {
          this.log.warn({ err: this.scrubber.scrub(describeError(error)) }, 'outbox LISTEN session lost');
          resolve();
        });
        client.on('end', () => resolve());
      });
      client.on('notification', () => this.wake());
      try {
        await client.connect();
        await client.query(`listen "${outboxChannel(this.schema).replaceAll('"', '""')}"`);
        this.#client = client;
        failures = 0;
        // Rows committed while no session listened are found now, not at the next poll.
        this.wake();
        await lost;
      } catch (error) {
        this.log.warn({ err: this.scrubber.scrub(describeError(error)) }, 'outbox LISTEN session failed');
      } finally {
        this.#client = undefined;
        await client.end().catch(() => {});
      }
      if (this.#stopped) break;
      failures++;
      await sleep(Math.min(RECONNECT_MAX_MS, 500 * 2 ** Math.min(failures, 6)));
    }
  }

  async close(): Promise<void> {
    this.#stopped = true;
    await this.#client?.end().catch(() => {});
    await this.#done;
  }
}
