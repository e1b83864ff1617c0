import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { KEEPALIVE_DELAY_MS } from '../../db/connect.js';
import { describeError } from '../../errors.js';
import type { Logger, SecretScrubber } from '../../log.js';

/** The channel `enqueue_event` and enqueueEvents notify on commit. */
const outboxChannel = (schema: string): string => `${schema}_events_outbox`;

const RECONNECT_MAX_MS = 30_000;
/** Longest `close` waits for the session to end: a shutdown has a deadline of its own. */
const CLOSE_TIMEOUT_MS = 2_000;

/**
 * A session that LISTENs for new outbox rows and calls `wake` on each notification, so a
 * committed event is sent within milliseconds rather than at the next poll. LISTEN needs a session
 * of its own (a transaction pooler cannot hold one: see DATABASE_LISTEN_URL). Losing it loses
 * nothing — the poll still reads the table — so it reconnects with backoff and never throws.
 */
export class OutboxListener {
  /** Ends the loop: aborts a back-off and ends the session, whether connecting or connected. */
  readonly #stop = new AbortController();
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
    const stop = this.#stop.signal;
    for (let failures = 0; !stop.aborted; ) {
      const client = new pg.Client({
        connectionString: this.url,
        application_name: 'review-mirror-listen',
        connectionTimeoutMillis: 10_000,
        // Without a delay pg leaves the system's (two hours): a session a NAT dropped would be
        // noticed that late, and until then only the poll would wake the outbox.
        keepAlive: true,
        keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
      });
      const lost = new Promise<void>((resolve) => {
        client.on('error', (error) => {
          this.log.warn({ err: this.scrubber.scrub(describeError(error)) }, 'outbox LISTEN session lost');
          resolve();
        });
        client.on('end', () => resolve());
      });
      client.on('notification', () => this.wake());
      // pg's connect does not settle when the client is ended before the server answered (its
      // own timeout is cleared then): the stop is raced with it, and the client abandoned.
      let abandon = () => {};
      const stopped = new Promise<void>((resolve) => {
        abandon = () => {
          resolve();
          void client.end().catch(() => {});
        };
      });
      stop.addEventListener('abort', abandon, { once: true });
      let connected = false;
      try {
        const connecting = client.connect().then(() => {
          connected = true;
        });
        await Promise.race([connecting, stopped]);
        if (stop.aborted) {
          connecting.catch(() => {});
          break;
        }
        await client.query(`listen "${outboxChannel(this.schema).replaceAll('"', '""')}"`);
        failures = 0;
        // Rows committed while no session listened are found now, not at the next poll.
        this.wake();
        await Promise.race([lost, stopped]);
      } catch (error) {
        if (!stop.aborted) {
          this.log.warn({ err: this.scrubber.scrub(describeError(error)) }, 'outbox LISTEN session failed');
        }
      } finally {
        stop.removeEventListener('abort', abandon);
        // An unconnected client would wait out its connect timeout here.
        const ended = client.end().catch(() => {});
        if (connected) await ended;
      }
      if (stop.aborted) break;
      failures++;
      await sleep(Math.min(RECONNECT_MAX_MS, 500 * 2 ** Math.min(failures, 6)), undefined, {
        signal: stop,
      }).catch(() => {});
    }
  }

  /** Stops listening; waits for the session to end, at most CLOSE_TIMEOUT_MS (then leaves it). */
  async close(): Promise<void> {
    this.#stop.abort();
    const timeout = new AbortController();
    const ended = await Promise.race([
      this.#done.then(() => true),
      sleep(CLOSE_TIMEOUT_MS, false, { signal: timeout.signal }).catch(() => false),
    ]);
    timeout.abort();
    if (!ended)
      this.log.warn({ timeoutMs: CLOSE_TIMEOUT_MS }, 'outbox LISTEN session not closed in time; left behind');
  }
}
