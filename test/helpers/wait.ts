import { setTimeout as sleep } from 'node:timers/promises';

/** Polls `condition` until it holds; fails after `timeoutMs` (a deadline, not a timed assertion). */
export async function waitFor(
  condition: () => Promise<boolean> | boolean,
  timeoutMs = 20_000,
  intervalMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(intervalMs);
  }
}
