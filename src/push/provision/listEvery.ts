import type { Page } from '../../partner-api/paginate.js';

/**
 * Every record of a directory listing, the active and the inactive ones: where a record a lost
 * create made under another slug can still be found. Records failing their schema are left out.
 */
export async function listEvery<T>(
  pages: (active: boolean, cursor: string | null, signal?: AbortSignal) => AsyncGenerator<Page<T>>,
  signal?: AbortSignal,
): Promise<T[]> {
  const records: T[] = [];
  for (const active of [true, false]) {
    for await (const page of pages(active, null, signal)) records.push(...page.items);
  }
  return records;
}
