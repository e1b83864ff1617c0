import { pause } from '../boundedWait.js';
import type { Db } from '../db/connect.js';
import type { Queryable } from '../db/queryable.js';
import type { Logger } from '../log.js';
import { acquireLease, holdsLease, readLeases, releaseLease, renewLease } from './leaseSql.js';

/** A write refused, or a run stopped, because this replica no longer holds the job's lease. */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
}

/**
 * Called in the transaction of each checkpoint write of an exclusive job, as its last statement
 * before the commit: throws LeaseLostError (rolling the transaction back) when another replica has
 * taken the job over meanwhile. Last, because the row lock it takes holds the lease's renewal back
 * until the commit: taken first, a write slow to finish (a lock held elsewhere, a COPY streaming
 * pages, a slow disk) kept the renewal waiting past the run's deadline, and the run stopped.
 */
export type Fence = (trx: Queryable) => Promise<void>;

/** The CLI queues behind a run of the daemon's at most this long (a long reconcile), then says so. */
export const CLI_LEASE_WAIT_MS = 10 * 60_000;

/** Share of a lease period after its last renewal was asked for at which a run stops (#holdUntil). */
const STOP_AT_SHARE_OF_LEASE = 0.75;

/** For runs that hold no lease: a dry run, a job that is not exclusive. */
export const NO_FENCE: Fence = async () => {};

export interface LeaseSettings {
  /** This replica, as `job_leases.holder`. */
  readonly holder: string;
  readonly seconds: number;
}

/**
 * An exclusive job's lease while its run lasts: renewed every third of its period, released at
 * the end. `signal` aborts when the caller's does or when the lease is lost (another replica took
 * it over, or it could not be renewed in time), so the run stops instead of working on
 * for nothing; the fence catches whatever it still tries to write.
 */
export class JobLease {
  readonly #controller = new AbortController();
  readonly #timer: NodeJS.Timeout;
  readonly #onCallerAbort: () => void;
  #deadline: NodeJS.Timeout | undefined;
  #renewing = false;
  #released = false;

  private constructor(
    private readonly db: Db,
    private readonly job: string,
    readonly token: string,
    private readonly settings: LeaseSettings,
    private readonly log: Logger,
    private readonly caller: AbortSignal | undefined,
    grantAskedAt: number,
  ) {
    this.#onCallerAbort = () => this.#controller.abort(caller?.reason);
    if (caller?.aborted) this.#onCallerAbort();
    caller?.addEventListener('abort', this.#onCallerAbort, { once: true });
    this.#timer = setInterval(() => void this.#renew(), (settings.seconds * 1000) / 3);
    this.#timer.unref();
    this.#holdUntil(grantAskedAt);
  }

  /** Takes `job`'s lease if nobody holds it; undefined when another replica does. */
  static async tryAcquire(
    db: Db,
    job: string,
    settings: LeaseSettings,
    log: Logger,
    signal?: AbortSignal,
  ): Promise<JobLease | undefined> {
    const askedAt = performance.now();
    const token = await acquireLease(db.knex, db, job, settings.holder, settings.seconds);
    return token === undefined ? undefined : new JobLease(db, job, token, settings, log, signal, askedAt);
  }

  /**
   * Takes `job`'s lease, waiting (polling, up to `maxWaitMs`) while another replica holds it:
   * the CLI queues behind the daemon's run instead of skipping.
   */
  static async acquire(
    db: Db,
    job: string,
    settings: LeaseSettings,
    log: Logger,
    options: { signal?: AbortSignal | undefined; maxWaitMs: number; pollMs?: number },
  ): Promise<JobLease> {
    const deadline = Date.now() + options.maxWaitMs;
    let told = false;
    for (;;) {
      const lease = await JobLease.tryAcquire(db, job, settings, log, options.signal);
      if (lease) return lease;
      const holder = (await readLeases(db.knex, db)).find((l) => l.job === job);
      if (Date.now() >= deadline) {
        throw new Error(
          `job ${job} is still held by ${holder?.holder ?? 'another replica'} after ${Math.round(options.maxWaitMs / 1000)} s; try again when its run ends`,
        );
      }
      if (!told) {
        log.info(
          { job, holder: holder?.holder, until: holder?.expiresAt },
          'job is running in another process; waiting for it',
        );
        told = true;
      }
      await pause(options.pollMs ?? 1000, options.signal);
    }
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  readonly fence: Fence = async (trx) => {
    if (!(await holdsLease(trx, this.db, this.job, this.token))) {
      throw new LeaseLostError(`lease of job ${this.job} lost to another replica; this run stops`);
    }
  };

  /**
   * Stops the run before the lease may run out: three quarters of a period after the last grant or
   * renewal was asked for, which is earlier than the database's expiry by a quarter of a period
   * (room for a late timer and a request already in flight). Kept by a timer of its own, since a
   * renewal can hang (a frozen connection waits out the query timeout, minutes): while it does,
   * another replica may take the job over once the lease runs out, and work that writes nothing
   * fenced (requests to the platform) must have stopped by then. Renewals come every third of a
   * period, so only one that has hung or failed for over five twelfths of it stops a run.
   */
  #holdUntil(askedAt: number): void {
    clearTimeout(this.#deadline);
    const leftMs = askedAt + this.settings.seconds * 1000 * STOP_AT_SHARE_OF_LEASE - performance.now();
    this.#deadline = setTimeout(() => this.#lose('lease of job not renewed in time'), leftMs);
    this.#deadline.unref();
  }

  async #renew(): Promise<void> {
    if (this.#renewing || this.#controller.signal.aborted) return;
    this.#renewing = true;
    try {
      const askedAt = performance.now();
      const renewed = await renewLease(this.db.knex, this.db, this.job, this.token, this.settings.seconds);
      // In flight when the run ended: the release's word is the last.
      if (this.#released) return;
      if (renewed) {
        if (!this.#controller.signal.aborted) this.#holdUntil(askedAt);
      } else {
        this.#lose('lease of job taken over by another replica, or run out');
      }
    } catch (error) {
      this.log.warn({ job: this.job, err: error }, 'could not renew the job lease');
    } finally {
      this.#renewing = false;
    }
  }

  #lose(why: string): void {
    clearTimeout(this.#deadline);
    if (this.#controller.signal.aborted) return;
    this.log.warn({ job: this.job, token: this.token }, `${why}; stopping its run`);
    this.#controller.abort(new LeaseLostError(`${why} (${this.job})`));
  }

  /** Stops renewing and frees the lease for the next run, on any replica. Never throws. */
  async release(): Promise<void> {
    this.#released = true;
    clearInterval(this.#timer);
    clearTimeout(this.#deadline);
    this.caller?.removeEventListener('abort', this.#onCallerAbort);
    await releaseLease(this.db.knex, this.db, this.job, this.token).catch((error: unknown) =>
      // Not freed: it runs out by itself within one lease period.
      this.log.warn({ job: this.job, err: error }, 'could not release the job lease'),
    );
  }
}
