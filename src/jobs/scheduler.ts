import cron, { type ScheduledTask } from 'node-cron';
import type { Logger } from '../log.js';
import {
  countSkipped,
  errorKindOf,
  interruptedByShutdown,
  type RunnableJob,
  type RunnerDeps,
  runJob,
} from './runner.js';

/** A job of the daemon: what to run, and when. Features export their specs; `daemon.ts` registers them. */
export interface JobSpec extends RunnableJob {
  /** A cron expression, or "off" to disable the job. */
  readonly schedule: string;
  /** Also run once as soon as the scheduler starts, even when the schedule is "off". */
  readonly runAtStart?: boolean;
}

/**
 * node-cron drops a tick that comes over a second late (an event loop busy with a migration, a
 * large parse, a collection): a daily reconcile would then wait a day. A late tick runs late
 * instead, however late, as long as the next one is not due yet (node-cron never runs two slots
 * of one task at once for it).
 */
const RUN_LATE_TICKS = Number.POSITIVE_INFINITY;

/** node-cron's own messages, which it would print raw on the console, as our log lines. */
function cronLogger(log: Logger, job: string) {
  const text = (message: string | Error) => (message instanceof Error ? message.message : message);
  return {
    info: (message: string) => log.debug({ job }, `node-cron: ${message}`),
    debug: (message: string | Error) => log.debug({ job }, `node-cron: ${text(message)}`),
    warn: (message: string) => log.warn({ job }, `node-cron: ${message}`),
    error: (message: string | Error, err?: Error) =>
      log.error({ job, err: err ?? message }, `node-cron: ${text(message)}`),
  };
}

/**
 * Runs the registered jobs on their cron expressions through the runner. A job never runs twice at
 * once in this process (a tick that finds it running is skipped and counted), a failing job never
 * crashes the process (the runner has recorded and counted it), nothing starts once `stop` began,
 * and `stop` waits for the runs in flight, aborting them after the grace period.
 */
export class Scheduler {
  readonly #deps: RunnerDeps;
  readonly #specs = new Map<string, JobSpec>();
  readonly #tasks: ScheduledTask[] = [];
  readonly #running = new Map<string, Promise<void>>();
  readonly #abort = new AbortController();
  /** Aborted as shutdown begins, before the grace period: runs failing from now on were stopped by it. */
  readonly #shutdown = new AbortController();
  #started = false;
  #stopping = false;

  constructor(deps: RunnerDeps) {
    this.#deps = deps;
  }

  /** Registers `spec`; it is scheduled by `start` (or at once, if already started). */
  add(spec: JobSpec): void {
    if (this.#specs.has(spec.name)) throw new Error(`job ${spec.name} is registered twice`);
    this.#specs.set(spec.name, spec);
    if (this.#started) this.#schedule(spec);
  }

  /** Starts the cron ticks of every registered job, and the runs due at start. */
  start(): void {
    if (this.#started || this.#stopping) return;
    this.#started = true;
    for (const spec of this.#specs.values()) this.#schedule(spec);
  }

  #schedule(spec: JobSpec): void {
    if (spec.schedule === 'off') {
      this.#deps.log.info({ job: spec.name, runAtStart: spec.runAtStart === true }, 'job not scheduled');
    } else {
      const task = cron.schedule(spec.schedule, () => void this.trigger(spec.name), {
        name: spec.name,
        noOverlap: false,
        missedExecutionTolerance: RUN_LATE_TICKS,
        logger: cronLogger(this.#deps.log, spec.name),
      });
      // Only when a whole period passed without a tick: the later tick runs, this one is lost.
      task.on('execution:missed', ({ date }) =>
        this.#deps.log.warn(
          { job: spec.name, slot: date },
          'job tick missed: the process was busy past the next tick',
        ),
      );
      this.#tasks.push(task);
    }
    if (spec.runAtStart) void this.trigger(spec.name);
  }

  /**
   * Runs the job once, in a run that begins after this call: after the one under way here, if
   * any, has ended (it may have read the world before what the caller just did). Never rejects.
   */
  async triggerAfresh(name: string): Promise<void> {
    await this.#running.get(name);
    return this.trigger(name);
  }

  /** Runs the job now unless it is already running here; resolves when that run ends, never rejects. */
  trigger(name: string): Promise<void> {
    const spec = this.#specs.get(name);
    if (spec === undefined) throw new Error(`no job named ${name}`);
    if (this.#stopping) return Promise.resolve();
    const current = this.#running.get(name);
    if (current) {
      countSkipped(this.#deps, name, 'process');
      return current;
    }
    const run = runJob(this.#deps, spec, {
      wait: false,
      signal: this.#abort.signal,
      shutdown: this.#shutdown.signal,
    })
      .then(
        () => {},
        (error: unknown) => {
          // Recorded and counted by the runner; a job failure never takes the process down.
          // Stopped by shutdown, the runner recorded and logged it interrupted; a run that lost
          // its lease meanwhile is a failure, as it counted it.
          if (interruptedByShutdown(error)) return;
          if (errorKindOf(error) === 'fatal') {
            this.#deps.log.error(
              { job: name, err: error },
              'job failed; retrying will not help until this is fixed',
            );
          } else {
            this.#deps.log.warn({ job: name, err: error }, 'job failed; the next run retries');
          }
        },
      )
      .finally(() => this.#running.delete(name));
    this.#running.set(name, run);
    return run;
  }

  /**
   * Shutdown began: nothing starts any more, and a run that fails from now on was stopped by it (a
   * back-off cut short, see PartnerApi.stopRetrying), which the runner records as interrupted.
   * Runs in flight go on; `stop` gives them the grace period.
   */
  shuttingDown(): void {
    this.#stopping = true;
    this.#shutdown.abort();
  }

  /** Stops scheduling, waits up to `graceMs` for runs in flight, then aborts them and waits again. */
  async stop(graceMs: number): Promise<void> {
    this.shuttingDown();
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
