import { type CheckedRecord, directoryPages, readDirectoryRecord } from './directoryPages.js';
import type { HttpClient } from './http.js';
import type { Page } from './paginate.js';
import {
  type Professional,
  type ProfessionalListItem,
  professionalListItemSchema,
  professionalPageSchema,
  professionalSchema,
} from './professionalsSchema.js';
import type { ResourceOptions } from './resourceOptions.js';

export interface ProfessionalsApi {
  /** The active (or the inactive) professionals from `cursor`, as listed (no `location_id`). */
  pages(
    active: boolean,
    cursor: string | null,
    signal?: AbortSignal,
  ): AsyncGenerator<Page<ProfessionalListItem>>;
  /** The single read: the only response carrying `location_id`. */
  get(slug: string, signal?: AbortSignal): Promise<Professional>;
  /** The same read for the mirror: a record failing its schema comes back as its rejection. */
  read(slug: string, signal?: AbortSignal): Promise<CheckedRecord<Professional>>;
  /**
   * Creates a professional (spec 4.5), which emails an invite to a real person. Never retried by
   * the transport: a lost answer is resolved by the caller reading the slug back.
   */
  create(body: NewProfessional, signal?: AbortSignal): Promise<Professional>;
}

/** The body of POST /professionals, in the API's own field names. */
export interface NewProfessional {
  readonly first_name: string;
  readonly last_name: string;
  readonly email: string;
  readonly slug: string;
  readonly location_id?: number | undefined;
  readonly active?: boolean | undefined;
}

const SINGLE_ROUTE = 'GET /professionals/:slug';

export function makeProfessionalsApi(http: HttpClient, options: ResourceOptions): ProfessionalsApi {
  return {
    pages: (active, cursor, signal) =>
      directoryPages(
        http,
        options,
        {
          path: '/professionals',
          key: 'professionals',
          schema: professionalPageSchema,
          record: professionalListItemSchema,
        },
        active,
        cursor,
        signal,
      ),
    get: (slug, signal) =>
      http.request('GET', `/professionals/${encodeURIComponent(slug)}`, {
        route: SINGLE_ROUTE,
        schema: professionalSchema,
        // `200 {"error": …}` is no record: failed with the platform's words, not as a bad schema.
        refusalInBody: true,
        signal,
      }),
    read: (slug, signal) =>
      readDirectoryRecord(
        http,
        `/professionals/${encodeURIComponent(slug)}`,
        SINGLE_ROUTE,
        professionalSchema,
        signal,
      ),
    create: (body, signal) =>
      http.request('POST', '/professionals', { body, schema: professionalSchema, idempotent: false, signal }),
  };
}
