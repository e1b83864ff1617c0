const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

export interface ShutdownListener {
  /** Aborts on the first SIGINT or SIGTERM. */
  readonly signal: AbortSignal;
  /** Resolves with the name of that first signal. */
  readonly received: Promise<NodeJS.Signals>;
  /** Stops listening (idempotent); call it when the work ends without a signal. */
  dispose(): void;
}

/**
 * Turns the first SIGINT or SIGTERM into an abort. Its listeners go at once, so a second Ctrl-C
 * gets Node's default behaviour back and kills a process whose shutdown hangs.
 */
export function listenForShutdown(): ShutdownListener {
  const controller = new AbortController();
  let resolve: (name: NodeJS.Signals) => void = () => {};
  const received = new Promise<NodeJS.Signals>((r) => {
    resolve = r;
  });
  const dispose = () => {
    for (const name of SIGNALS) process.off(name, onSignal);
  };
  const onSignal = (name: NodeJS.Signals) => {
    dispose();
    controller.abort(new Error(`interrupted by ${name}`));
    resolve(name);
  };
  for (const name of SIGNALS) process.on(name, onSignal);
  return { signal: controller.signal, received, dispose };
}
