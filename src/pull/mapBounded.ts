/**
 * Maps `items` through `fn` with at most `limit` calls in flight; results keep the input order.
 *
 * When a call throws, no further item is started, the calls in flight are waited for, and the
 * first error is thrown: nothing goes on reading (or writing) in the background once the caller
 * has been told the whole failed, and no rejection of a later call is left unhandled.
 */
export async function mapBounded<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failure: { readonly error: unknown } | undefined;
  const worker = async () => {
    while (failure === undefined && next < items.length) {
      const i = next++;
      try {
        results[i] = await fn(items[i]!);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker));
  if (failure !== undefined) throw failure.error;
  return results;
}
