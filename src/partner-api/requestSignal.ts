import { setMaxListeners } from 'node:events';

/** One request's abort signal: the caller's (shutdown) and a time limit, with nothing left behind. */
export interface RequestSignal {
  readonly signal: AbortSignal;
  readonly timedOut: () => boolean;
  /** Clears the timer and the listener on the caller's signal. */
  readonly dispose: () => void;
}

/**
 * A plain controller with one timer and one listener, removed when the request ends, rather than
 * `AbortSignal.any([caller, AbortSignal.timeout()])`: on Node 20 each `any` stays registered on
 * the long-lived caller signal until garbage collection, and at thousands of requests a second
 * that bookkeeping cost more CPU than the requests themselves.
 */
export function requestSignal(caller: AbortSignal | undefined, timeoutMs: number): RequestSignal {
  const controller = new AbortController();
  let timedOut = false;
  const timer =
    timeoutMs > 0
      ? setTimeout(() => {
          timedOut = true;
          controller.abort(new DOMException('request timed out', 'TimeoutError'));
        }, timeoutMs)
      : undefined;
  const onAbort = () => controller.abort(caller?.reason);
  // Every request in flight listens to the caller's one signal; that fan-out is by design.
  if (caller !== undefined) setMaxListeners(0, caller);
  if (caller?.aborted) controller.abort(caller.reason);
  else caller?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    dispose: () => {
      if (timer !== undefined) clearTimeout(timer);
      caller?.removeEventListener('abort', onAbort);
    },
  };
}
