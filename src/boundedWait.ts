import { setTimeout as sleep } from 'node:timers/promises';

/**
 * `promise`'s value, or `fallback` once `ms` have passed without it: a wait with a bound. The
 * promise is left to settle on its own; a rejection before the bound still rejects.
 */
export async function valueWithin<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<F>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** `promise`, or the caller's abort reason as soon as `signal` aborts (a shared wait, not cut itself). */
export async function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  signal.throwIfAborted();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([promise, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort!);
  }
}

/**
 * Waits `ms`, or throws `signal`'s reason as soon as it aborts: the caller's reason (`interrupted
 * by SIGTERM`), where timers/promises throws an AbortError of its own that says nothing.
 */
export async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  await sleep(ms, undefined, { signal }).catch((error: unknown) => {
    signal?.throwIfAborted();
    throw error;
  });
}
