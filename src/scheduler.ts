import cron, { type ScheduledTask } from 'node-cron';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';

/** A unit of scheduled work. It must stop promptly once `signal` aborts (shutdown). */
export type Job = (signal: AbortSignal) => Promise<void>;

/**
 * Runs named jobs on cron expressions. A job never runs twice at once (a tick that finds it
 * running is skipped and counted), a failing job is logged and counted but never crashes the
 * process, and `stop` waits for the runs in flight, aborting them after the grace period.
 */
export class Scheduler {
  readonly #tasks: ScheduledTask[] = [];
  readonly #running = new Map<string, Promise<void>>();
  readonly #abort = new AbortController();
  readonly #log: Logger;
  readonly #metrics: Metrics;

  constructor(log: Logger, metrics: Metrics) {
    this.#log = log;
    this.#metrics = metrics;
  }

  /** Schedules `job`; an expression of "off" disables it. */
  add(name: string, expression: string, job: Job): void {
    if (expression === 'off') {
      this.#log.info({ job: name }, 'job disabled');
      return;
    }
    const task = cron.schedule(expression, () => void this.trigger(name, job), { name, noOverlap: false });
    this.#tasks.push(task);
  }

  /** Starts `job` now unless it is already running; resolves when that run ends. */
  trigger(name: string, job: Job): Promise<void> {
    if (this.#abort.signal.aborted) return Promise.resolve();
    const current = this.#running.get(name);
    if (current) {
      this.#metrics.jobRuns.inc({ job: name, outcome: 'skipped' });
      this.#log.debug({ job: name }, 'job still running; tick skipped');
      return current;
    }
    const run = this.#execute(name, job).finally(() => this.#running.delete(name));
    this.#running.set(name, run);
    return run;
  }

  async #execute(name: string, job: Job): Promise<void> {
    const endTimer = this.#metrics.jobDuration.startTimer({ job: name });
    this.#metrics.jobRunning.set({ job: name }, 1);
    try {
      await job(this.#abort.signal);
      this.#metrics.jobRuns.inc({ job: name, outcome: 'success' });
      this.#metrics.jobLastSuccess.set({ job: name }, Date.now() / 1000);
    } catch (error) {
      this.#metrics.jobRuns.inc({ job: name, outcome: 'failed' });
      this.#log.error({ job: name, err: error }, 'job failed');
    } finally {
      this.#metrics.jobRunning.set({ job: name }, 0);
      endTimer();
    }
  }

  /** Stops scheduling, waits up to `graceMs` for runs in flight, then aborts them and waits again. */
  async stop(graceMs: number): Promise<void> {
    for (const task of this.#tasks) await task.stop();
    const inFlight = [...this.#running.values()];
    if (inFlight.length === 0) {
      this.#abort.abort();
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
    });
    await Promise.race([Promise.allSettled(inFlight), graceOver]);
    clearTimeout(timer);
    this.#abort.abort();
    await Promise.allSettled(inFlight);
  }
}
