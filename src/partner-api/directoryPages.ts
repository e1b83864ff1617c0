import { z } from 'zod';
import { storableJson } from '../db/storableText.js';
import { ApiSchemaError, ApiUnavailableError } from './errors.js';
import { type HttpClient, platformErrorText } from './http.js';
import { type Page, pageOf, paginate } from './paginate.js';
import type { Pagination } from './paginationSchema.js';
import { saysRefused } from './refusal.js';
import type { ResourceOptions } from './resourceOptions.js';
import { type RejectedRecord, rejection } from './validRecords.js';

/**
 * A single record read for the mirror: the record; or, when it fails its schema, its rejection;
 * or, when the platform answered with an error or a body that is no record at all instead, why
 * (`failed`).
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
  let body: unknown;
  try {
    body = await http.request('GET', path, { route, schema: z.unknown(), signal });
  } catch (error) {
    const unreadable = unreadableAnswer(error);
    if (unreadable === undefined) throw error;
    return { failed: unreadable };
  }
  // No body, or one that is not JSON (a login page answered 200), as the transport may hand it on
  // when it does not fail it: no record either, and every such read would share one quarantine
  // row, saying neither which record it was nor what came.
  if (body === undefined || body === null) {
    return { failed: 'the 2xx answer is not the record: its body is empty, null or not JSON' };
  }
  const parsed = schema.safeParse(body);
  if (parsed.success) return { record: parsed.data };
  // storableJson: an answer nested thousands deep would overflow JSON.stringify's stack.
  if (saysRefused(body)) return { failed: platformErrorText(storableJson(body)) };
  return { rejected: rejection(body, parsed.error) };
}

/**
 * Why a 2xx answer is not the record when the transport failed it for its body (not JSON, cut
 * short, too large) after its retries, or undefined for any other failure: a platform that is down
 * still fails the sync, while one record's unreadable answer fails only its read.
 */
function unreadableAnswer(error: unknown): string | undefined {
  if (!(error instanceof ApiUnavailableError || error instanceof ApiSchemaError)) return undefined;
  const { status } = error;
  if (status === undefined || status < 200 || status > 299) return undefined;
  return `the ${status} answer is not the record: ${error.message}`;
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
