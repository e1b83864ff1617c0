import { performance } from 'node:perf_hooks';

/**
 * `ask`, asked again only once its last answer is `ms` old: a run of callers needing it costs one
 * question, and those that come while it is asked share it. A no is forgotten at once when
 * `forgetNo`, so that the next caller asks again rather than take it for `ms`.
 */
export function answerFreshFor(
  ms: number,
  ask: () => Promise<boolean>,
  options: { forgetNo?: boolean } = {},
): () => Promise<boolean> {
  let last: { readonly at: number; readonly answer: Promise<boolean> } | undefined;
  return () => {
    if (last === undefined || performance.now() - last.at > ms) {
      const answer: Promise<boolean> = ask().then((yes) => {
        // Unless a newer question has replaced it meanwhile.
        if (!yes && options.forgetNo && last?.answer === answer) last = undefined;
        return yes;
      });
      last = { at: performance.now(), answer };
    }
    return last.answer;
  };
}
