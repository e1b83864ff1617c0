import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { valueWithin } from '../../boundedWait.js';
import { KEEPALIVE_DELAY_MS } from '../../db/connect.js';
import { describeError } from '../../errors.js';
import type { Logger, SecretScrubber } from '../../log.js';
import type { Metrics } from '../../metrics.js';

/** The channel `enqueue_event` and enqueueEvents notify on commit. */
const outboxChannel = (schema: string): string => `${schema}_events_outbox`;

const RECONNECT_MAX_MS = 30_000;
/** Longest `close` waits for the session to end: a shutdown has a deadline of its own. */
const CLOSE_TIMEOUT_MS = 2_000;
/**
 * Longest a NOTIFY sent once the session listens may take to reach it. A server delivers one in
 * milliseconds; a commit held up behind the WAL's fsync takes some hundreds.
 */
const PROBE_TIMEOUT_MS = 5_000;
/**
 * Before a session that received nothing is tried again. A pooler stays one until its
 * configuration changes, and each try leaves a pooled server connection listening.
 */
const DEAF_RETRY_MS = 5 * 60_000;
/**
 * Longest the session's LISTEN, or the check's NOTIFY, may go unanswered. A proxy or pooler that
 * accepted the session and then stalls would otherwise hold the loop for good, reconnecting never.
 */
const QUERY_TIMEOUT_MS = 10_000;

const DEAF_WARNING =
  'outbox LISTEN receives no notifications through its connection (DATABASE_LISTEN_URL, else DATABASE_URL): a transaction pooler such as PgBouncer cannot hold a LISTEN. New events wait for the poll (EVENTS_POLL_SECONDS) instead of being sent at once; point DATABASE_LISTEN_URL at PostgreSQL itself or a session-mode pool';

/**
 * A session that LISTENs for new outbox rows and calls `wake` on each notification, so a
 * committed event is sent within milliseconds rather than at the next poll. LISTEN needs a session
 * of its own (a transaction pooler cannot hold one: see DATABASE_LISTEN_URL). Losing it loses
 * nothing — the poll still reads the table — so it reconnects with backoff and never throws.
 *
 * A connection through a transaction pooler accepts the LISTEN and then delivers nothing, without
 * an error. So once listening, the session has a NOTIFY sent to itself from another connection:
 * one that does not arrive within PROBE_TIMEOUT_MS is said once in the log, and shown by
 * `review_mirror_outbox_listening` (0), and the session is tried again much later.
 */
export class OutboxListener {
  /** Ends the loop: aborts a back-off and ends the session, whether connecting or connected. */
  readonly #stop = new AbortController();
  readonly #done: Promise<void>;
  /** The payload of the NOTIFY under way that checks the session, and what its arrival calls. */
  #probe: { readonly token: string; readonly arrived: () => void } | undefined;
  /** Whether the last check found the session deaf (said once until one finds it hearing again). */
  #deaf = false;

  constructor(
    private readonly url: string,
    private readonly schema: string,
    private readonly wake: () => void,
    private readonly log: Logger,
    private readonly scrubber: SecretScrubber,
    private readonly metrics?: Pick<Metrics, 'outboxListening'>,
  ) {
    this.metrics?.outboxListening.set(0);
    this.#done = this.#run();
  }

  #client(applicationName: string): pg.Client {
    return new pg.Client({
      connectionString: this.url,
      application_name: applicationName,
      connectionTimeoutMillis: 10_000,
      query_timeout: QUERY_TIMEOUT_MS,
      // Without a delay pg leaves the system's (two hours): a session a NAT dropped would be
      // noticed that late, and until then only the poll would wake the outbox.
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
    });
  }

  async #run(): Promise<void> {
    const stop = this.#stop.signal;
    for (let failures = 0; !stop.aborted; ) {
      const client = this.#client('review-mirror-listen');
      /** This session heard nothing: it is tried again after DEAF_RETRY_MS, not the back-off. */
      let heardNothing = false;
      const lost = new Promise<void>((resolve) => {
        client.on('error', (error) => {
          this.log.warn({ err: this.scrubber.scrub(describeError(error)) }, 'outbox LISTEN session lost');
          resolve();
        });
        client.on('end', () => resolve());
      });
      client.on('notification', (notification) => {
        if (this.#probe !== undefined && notification.payload === this.#probe.token) this.#probe.arrived();
        else this.wake();
      });
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
        // Rows committed while no session listened are found now, not at the next poll.
        this.wake();
        const hears = await this.#hearsOthers(Promise.race([lost, stopped]));
        if (stop.aborted) break;
        heardNothing = hears === false;
        this.#heard(hears);
        if (hears) {
          failures = 0;
          await Promise.race([lost, stopped]);
        }
      } catch (error) {
        if (!stop.aborted) {
          this.log.warn({ err: this.scrubber.scrub(describeError(error)) }, 'outbox LISTEN session failed');
        }
      } finally {
        stop.removeEventListener('abort', abandon);
        this.metrics?.outboxListening.set(0);
        // An unconnected client would wait out its connect timeout here.
        const ended = client.end().catch(() => {});
        if (connected) await ended;
      }
      if (stop.aborted) break;
      failures++;
      const backOff = heardNothing
        ? DEAF_RETRY_MS
        : Math.min(RECONNECT_MAX_MS, 500 * 2 ** Math.min(failures, 6));
      await sleep(backOff, undefined, { signal: stop }).catch(() => {});
    }
  }

  /**
   * Whether a NOTIFY on the channel from another session reaches this one within
   * PROBE_TIMEOUT_MS; undefined when `ended` (the session lost, or the stop) came first. Sent on a
   * connection of its own: through a transaction pooler the session's own NOTIFY can come back on
   * the server connection it borrows, while one from any other session never arrives.
   */
  async #hearsOthers(ended: Promise<void>): Promise<boolean | undefined> {
    const token = randomUUID();
    const arrived = new Promise<boolean>((resolve) => {
      this.#probe = { token, arrived: () => resolve(true) };
    });
    const over = ended.then(() => undefined);
    const sender = this.#client('review-mirror-listen-check');
    const timeout = new AbortController();
    try {
      const sent = sender
        .connect()
        .then(() => sender.query('select pg_notify($1, $2)', [outboxChannel(this.schema), token]));
      // A connect pg never settles (see #run) is left to its own timeout.
      sent.catch(() => {});
      if ((await Promise.race([sent.then(() => true), over])) === undefined) return undefined;
      return await Promise.race([
        arrived,
        over,
        sleep(PROBE_TIMEOUT_MS, false, { signal: timeout.signal }).catch(() => false),
      ]);
    } finally {
      timeout.abort();
      this.#probe = undefined;
      void sender.end().catch(() => {});
    }
  }

  /** Records what a check of the session found: said in the log when it changes (deaf, or hearing again). */
  #heard(hears: boolean | undefined): void {
    if (hears === undefined) return;
    this.metrics?.outboxListening.set(hears ? 1 : 0);
    if (hears && this.#deaf) this.log.info('outbox LISTEN receives notifications again');
    if (!hears && !this.#deaf) this.log.warn({ waitedMs: PROBE_TIMEOUT_MS }, DEAF_WARNING);
    this.#deaf = !hears;
  }

  /** Stops listening; waits for the session to end, at most CLOSE_TIMEOUT_MS (then leaves it). */
  async close(): Promise<void> {
    this.#stop.abort();
    const ended = await valueWithin(
      this.#done.then(() => true),
      CLOSE_TIMEOUT_MS,
      false,
    );
    if (!ended)
      this.log.warn({ timeoutMs: CLOSE_TIMEOUT_MS }, 'outbox LISTEN session not closed in time; left behind');
  }
}
