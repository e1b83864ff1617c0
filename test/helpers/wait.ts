import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The one polling helper: calls `probe` until it returns something other than `undefined` or
 * `false`, and returns that value; fails after `timeoutMs` (a deadline, not a timed assertion).
 */
export async function waitFor<T>(
  probe: () => Promise<T> | T,
  timeoutMs = 20_000,
  intervalMs = 25,
): Promise<Exclude<T, undefined | false>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value as Exclude<T, undefined | false>;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(intervalMs);
  }
}
