import { z } from 'zod';
import { type HttpClient, platformErrorText } from './http.js';
import { type Page, pageOf, paginate } from './paginate.js';
import type { Pagination } from './paginationSchema.js';
import type { ResourceOptions } from './resourceOptions.js';
import { type RejectedRecord, rejection } from './validRecords.js';

/**
 * A single record read for the mirror: the record; or, when it fails its schema, its rejection;
 * or, when the platform answered with an error instead of a record, its text (`failed`).
 */
export type CheckedRecord<T> =
  | { readonly record: T }
  | { readonly rejected: RejectedRecord }
  | { readonly failed: string };

/**
 * The single read of a directory record by slug, for the mirror: a record that fails its schema
 * comes back to be quarantined, as a listed one would, instead of failing the whole sync.
 *
 * A 2xx body with an `error` and no `id` (`200 {"error": "Location not found"}`) is no record at
 * all: quarantined, it would be kept as one, sighted again on every sync. It comes back as a
 * failed read, with the platform's text.
 */
export async function readDirectoryRecord<T>(
  http: HttpClient,
  path: string,
  route: string,
  schema: z.ZodType<T>,
  signal?: AbortSignal,
): Promise<CheckedRecord<T>> {
  const body = await http.request('GET', path, { route, schema: z.unknown(), signal });
  const parsed = schema.safeParse(body);
  if (parsed.success) return { record: parsed.data };
  if (isErrorAnswer(body)) return { failed: platformErrorText(JSON.stringify(body)) };
  return { rejected: rejection(body, parsed.error) };
}

function isErrorAnswer(body: unknown): boolean {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const { id, error } = body as { id?: unknown; error?: unknown };
  return id === undefined && error !== undefined && error !== null;
}

/**
 * The listing of a directory resource (spec 4.4, 4.5): active or inactive records, page by page,
 * its records under the resource's own key (`locations`, `professionals`). Each record is checked
 * on its own: those that fail come back as the page's `rejected`, for the quarantine.
 */
export function directoryPages<K extends string, T extends { id: string | number }>(
  http: HttpClient,
  options: ResourceOptions,
  list: {
    path: `/${K}`;
    key: K;
    schema: z.ZodType<Record<K, unknown[]> & { pagination: Pagination }>;
    record: z.ZodType<T>;
  },
  active: boolean,
  cursor: string | null,
  signal?: AbortSignal,
): AsyncGenerator<Page<T>> {
  const route = `GET ${list.path}`;
  return paginate<T>(
    async (c, s) => {
      const body = await http.request('GET', list.path, {
        query: { limit: options.pageSize, active: String(active), cursor: c },
        route,
        schema: list.schema,
        signal: s,
      });
      return pageOf(body[list.key], body.pagination, list.record, {
        route,
        field: list.key,
        limit: options.pageSize,
      });
    },
    cursor,
    { signal, route, maxPages: options.maxPagesPerWalk, idOf: (r) => r.id, log: http.log },
  );
}
