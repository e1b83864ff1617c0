/** What a run did, stored in `sync_runs.counts`. Jobs add to it as they go, so a failed run keeps its partial counts. */
export type RunCounts = Record<string, number>;

export const addCount = (counts: RunCounts, name: string, n = 1): void => {
  counts[name] = (counts[name] ?? 0) + n;
};
